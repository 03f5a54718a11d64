"""``run_search(cfg)``: the one entry point both the CLI and Python callers use."""

from __future__ import annotations

from pathlib import Path

import optuna

from nas import store
from nas.config import StudyConfig


def run_search(cfg: StudyConfig, *, out_root: str | Path = "runs", progress: bool = True
               ) -> Path:
    """Run or resume ``cfg`` with its backend; returns ``runs/<study>``."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study_dir = store.prepare_dir(cfg, out_root)
    if cfg.backend == "ray":
        from nas.drivers.ray_driver import run as run_ray

        run_ray(cfg, study_dir, progress=progress)
    else:
        from nas.drivers.optuna_driver import run as run_optuna

        run_optuna(cfg, study_dir, workers=cfg.workers, progress=progress)
    return study_dir
