"""The DDP training entry: exact resume, sharding equivalence, and a real torchrun run whose rank
is killed (SIGKILL) and rerun from the checkpoint."""

from __future__ import annotations

import itertools
import os
import signal
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from hwnas.common.errors import ConfigError, HwnasError
from hwnas.common.threads import torch_threads
from hwnas.train.ddp import DDPJob, Dist, FileStore, build_loss, run_job, train

HERE = Path(__file__).resolve().parent
FIT = {"steps": 40, "batch_size": 64, "lr": 0.05, "augment": False}


def killer_loss(*, kill_at: int, marker: str, rank: int = 1, device: str = "cpu"):
    """Cross-entropy that SIGKILLs one rank at its ``kill_at``-th step, once (``marker``)."""
    calls = itertools.count(1)
    me = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0

    def loss_fn(logits, targets, inputs):
        if next(calls) == kill_at and me == rank and not os.path.exists(marker):
            Path(marker).touch()
            os.kill(os.getpid(), signal.SIGKILL)
        return F.cross_entropy(logits, targets)

    return loss_fn


@pytest.fixture(autouse=True)
def _one_thread():
    with torch_threads(1):
        yield


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    # No batch norm: with it, ranks normalise over their half batch and 2 ranks != 1 process.
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Flatten(),
                        nn.Linear(8 * 64, 10))
    torch.save(net, tmp_path / "model.pt")
    return tmp_path / "model.pt"


def _job(model_file: Path, out: Path, **kw) -> DDPJob:
    return DDPJob(model_path=str(model_file), out_dir=str(out), data="digits",
                  fit=dict(FIT), checkpoint_every=10, log_every=10, **kw)


def _weights(out: Path) -> dict[str, torch.Tensor]:
    return torch.load(out / "final.pt", weights_only=True)


def test_job_round_trips_through_json(tmp_path: Path, model_file: Path) -> None:
    job = _job(model_file, tmp_path / "o", loss_factory="hwnas.compress.distill:make_loss",
               loss_kwargs={"teacher_path": "t.pt", "alpha": 0.3})
    assert DDPJob.load(job.save(tmp_path / "job.json")) == job


def test_stop_and_resume_is_exact(tmp_path: Path, model_file: Path) -> None:
    ref = train(_job(model_file, tmp_path / "a"), Dist(), FileStore(tmp_path / "a"))
    assert ref["steps"] == 40 and ref["resumed_from"] == 0 and ref["val_acc"] > 0.5
    stopped = train(_job(model_file, tmp_path / "b", stop_after=17), Dist(),
                    FileStore(tmp_path / "b"))
    assert stopped["stopped"] and not (tmp_path / "b" / "final.pt").exists()
    again = train(_job(model_file, tmp_path / "b"), Dist(), FileStore(tmp_path / "b"))
    assert again["resumed_from"] == 17 and again["steps"] == 40
    a, b = _weights(tmp_path / "a"), _weights(tmp_path / "b")
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert again["val_acc"] == ref["val_acc"]


def test_bad_jobs_get_clear_errors(tmp_path: Path, model_file: Path) -> None:
    job = _job(model_file, tmp_path / "o")
    job.fit["batch_size"] = 63
    with pytest.raises(ConfigError, match="multiple of 2"):
        train(job, Dist(world=2), FileStore(tmp_path / "o"))
    with pytest.raises(ConfigError, match="package.module:function"):
        build_loss(_job(model_file, tmp_path, loss_factory="hwnas.compress.distill"), "cpu")


@pytest.mark.slow
def test_torchrun_rank_killed_then_rerun_resumes(tmp_path: Path, model_file: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # Reference: one process, no torchrun. Two ranks with half batches each must match it.
    train(_job(model_file, tmp_path / "ref"), Dist(), FileStore(tmp_path / "ref"))
    monkeypatch.setenv("PYTHONPATH", str(HERE))  # the ranks import killer_loss from here
    out = tmp_path / "ddp"
    job = _job(model_file, out, loss_factory="test_ddp:killer_loss",
               loss_kwargs={"kill_at": 25, "marker": str(tmp_path / "killed")})
    with pytest.raises(HwnasError, match="torchrun exited"):
        run_job(job, nproc=2, threads=1, timeout=300)
    assert (tmp_path / "killed").exists() and not (out / "result.json").exists()
    assert torch.load(out / "checkpoint.pt", weights_only=True)["step"] == 20
    result = run_job(job, nproc=2, threads=1, timeout=300)  # the same command again
    assert result["world"] == 2 and result["resumed_from"] == 20 and result["steps"] == 40
    ref, got = _weights(tmp_path / "ref"), _weights(out)
    for k in ref:
        torch.testing.assert_close(got[k], ref[k], atol=1e-5, rtol=1e-4)
