"""The same training job across machines with Ray Train (``--backend ray --workers N``).

``TorchTrainer`` starts ``N`` workers and their process group (gloo on CPU, NCCL with GPUs); each
worker runs ``ddp.train`` unchanged, with checkpoints going through Ray (``ray.train.report``
with a ``Checkpoint``) instead of a file, so the latest one survives a lost node when the storage
path is shared. ``FailureConfig(max_failures=...)`` restarts the worker group after a failure, and
the restarted workers resume from ``ray.train.get_checkpoint()``. A local Ray is started when no
cluster is given; ``address="auto"`` (or ``ray://...``) joins one.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import torch

from hwnas.common.errors import HwnasError
from hwnas.train.ddp import DDPJob, Dist, train
from hwnas.train.loop import FitConfig

_CKPT = "checkpoint.pt"


class RayStore:
    """Checkpoints through Ray Train: every rank reports, rank 0 attaches the state."""

    def load(self) -> dict[str, Any] | None:
        import ray.train

        ck = ray.train.get_checkpoint()
        if ck is None:
            return None
        with ck.as_directory() as folder:
            return torch.load(Path(folder) / _CKPT, weights_only=True)

    def save(self, state: dict[str, Any] | None, metrics: dict[str, Any]) -> None:
        import ray.train

        if state is None:
            ray.train.report(metrics)
            return
        with tempfile.TemporaryDirectory() as folder:
            torch.save(state, Path(folder) / _CKPT)
            ray.train.report(metrics, checkpoint=ray.train.Checkpoint.from_directory(folder))


def _worker(config: dict[str, Any]) -> None:
    """Runs in every Ray worker; Ray has already joined the process group."""
    import ray.train
    import ray.train.torch

    ctx = ray.train.get_context()
    job = DDPJob(**config)
    cuda = torch.device(FitConfig(**job.fit).device).type == "cuda"
    device = str(ray.train.torch.get_device()) if cuda else "cpu"
    d = Dist(rank=ctx.get_world_rank(), world=ctx.get_world_size(),
             local_rank=ctx.get_local_rank(), device=device)
    result = train(job, d, RayStore())
    metrics = {"final": True, "step": result["steps"]}
    if not d.main:
        ray.train.report(metrics)
        return
    # The last checkpoint carries the trained weights and rank 0's figures to the driver.
    with tempfile.TemporaryDirectory() as folder:
        torch.save(torch.load(Path(job.out_dir) / "final.pt", weights_only=True),
                   Path(folder) / "final.pt")
        (Path(folder) / "result.json").write_text(json.dumps(result))
        ray.train.report(metrics, checkpoint=ray.train.Checkpoint.from_directory(folder))


def fit_ray(job: DDPJob, *, workers: int = 2, use_gpu: bool = False, max_failures: int = 1,
            address: str | None = None, cpus_per_worker: float = 1.0) -> dict[str, Any]:
    """Train ``job`` on ``workers`` Ray workers; returns rank 0's result (also ``result.json``).

    As with torchrun, the trained weights end in ``out_dir/final.pt``, here taken from the last
    Ray checkpoint; the run's checkpoints and Ray's records live under ``out_dir/ray``.
    """
    import ray
    from ray.train import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    out = Path(job.out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    job.save(out / "job.json")
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": {"OMP_NUM_THREADS": str(max(1, int(cpus_per_worker))),
                                           "PYTHONPATH": os.environ.get("PYTHONPATH", "")}})
    trainer = TorchTrainer(
        _worker, train_loop_config={**vars(job), "out_dir": str(out)},
        torch_config=TorchConfig(backend=job.backend or ("nccl" if use_gpu else "gloo")),
        scaling_config=ScalingConfig(num_workers=workers, use_gpu=use_gpu,
                                     resources_per_worker={"CPU": cpus_per_worker}),
        run_config=RunConfig(name=out.name, storage_path=str(out / "ray"),
                             failure_config=FailureConfig(max_failures=max_failures),
                             checkpoint_config=CheckpointConfig(num_to_keep=2)))
    outcome = trainer.fit()
    if outcome.error is not None or outcome.checkpoint is None:
        raise HwnasError(f"Ray Train run failed (records in {out / 'ray'}): {outcome.error}")
    return _collect(outcome, out)


def _collect(outcome: Any, out: Path) -> dict[str, Any]:
    """Final weights and rank 0's figures from the last Ray checkpoint, so the driver needs no
    file system shared with the workers."""
    with outcome.checkpoint.as_directory() as folder:
        state = torch.load(Path(folder) / "final.pt", weights_only=True)
        result = json.loads((Path(folder) / "result.json").read_text())
    torch.save(state, out / "final.pt")
    result["ray_checkpoint"] = outcome.checkpoint.path
    (out / "result.json").write_text(json.dumps(result, indent=1))
    return result
