"""Search drivers: ``optuna_driver`` (default, RDB storage, worker processes) and
``ray_driver`` (Ray Tune with OptunaSearch; results copied into the same storage)."""
