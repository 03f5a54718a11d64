"""The DDP training entry: exact resume, sharding equivalence, and a real torchrun run whose rank
is killed (SIGKILL) and rerun from the checkpoint."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
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


def tiny_net(*, seed: int = 0, device: str = "cpu") -> nn.Module:
    """The jobs' model factory (``test_ddp:tiny_net``): the same weights in every rank.

    No batch norm: with it, ranks normalise over their half batch and 2 ranks != 1 process."""
    gen = torch.Generator().manual_seed(seed)
    net = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Flatten(),
                        nn.Linear(8 * 64, 10))
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.1)
    return net.to(device)


def clip_hook(*, limit: float, device: str = "cpu"):
    """A step hook factory (``test_ddp:clip_hook``): clamps every parameter to +-limit."""

    @torch.no_grad()
    def hook(model: nn.Module) -> None:
        for p in model.parameters():
            p.clamp_(-limit, limit)

    return hook


@pytest.fixture
def model_file() -> str:
    return "test_ddp:tiny_net"


def _job(model_file: str, out: Path, **kw) -> DDPJob:
    return DDPJob(model_factory=model_file, out_dir=str(out), data="digits",
                  fit=dict(FIT), checkpoint_every=10, log_every=10, **kw)


def _weights(out: Path) -> dict[str, torch.Tensor]:
    return torch.load(out / "final.pt", weights_only=True)


def test_job_round_trips_through_json(tmp_path: Path, model_file: str) -> None:
    job = _job(model_file, tmp_path / "o", loss_factory="hwnas.compress.distill:make_loss",
               loss_kwargs={"teacher_factory": "search_spaces.checkpoint:load_model",
                            "teacher_kwargs": {"path": "t.pt"}, "alpha": 0.3})
    assert DDPJob.load(job.save(tmp_path / "job.json")) == job


def test_one_process_takes_exactly_the_steps_fit_takes(tmp_path: Path, model_file: str) -> None:
    # One training loop: the DDP entry as one process and fit, with channels_last and a step
    # hook, end with the same weights (a skipped hook or another memory format would differ).
    from hwnas.train.data import load_data
    from hwnas.train.loop import FitConfig, fit

    job = _job(model_file, tmp_path / "j", step_hook="test_ddp:clip_hook",
               step_hook_kwargs={"limit": 0.12})
    job.fit.update(channels_last=True, augment=True, seed=3)
    train(job, Dist(), FileStore(tmp_path / "j"))
    model = tiny_net()
    fit(model, load_data("digits"), FitConfig(**job.fit), step_hook=clip_hook(limit=0.12))
    got = _weights(tmp_path / "j")
    for k, v in model.state_dict().items():
        torch.testing.assert_close(got[k], v, atol=1e-6, rtol=1e-5)
    assert max(float(v.abs().max()) for v in got.values()) <= 0.12 + 1e-7
    assert model[0].weight.is_contiguous(memory_format=torch.channels_last)


def test_stop_and_resume_is_exact(tmp_path: Path, model_file: str) -> None:
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


def test_bad_jobs_get_clear_errors(tmp_path: Path, model_file: str) -> None:
    job = _job(model_file, tmp_path / "o")
    job.fit["batch_size"] = 63
    with pytest.raises(ConfigError, match="multiple of 2"):
        train(job, Dist(world=2), FileStore(tmp_path / "o"))
    with pytest.raises(ConfigError, match="package.module:function"):
        build_loss(_job(model_file, tmp_path, loss_factory="hwnas.compress.distill"), "cpu")


@pytest.mark.slow
def test_torchrun_rank_killed_then_rerun_resumes(tmp_path: Path, model_file: str,
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


@pytest.mark.parametrize(("device", "backend", "expected"), [
    ("cpu", None, "gloo"), ("cuda", None, "nccl"), ("cuda:1", None, "nccl"),
    ("cuda", "gloo", "gloo"),
])
def test_the_process_group_backend_follows_the_device(device, backend, expected):
    from hwnas.train.ddp import group_backend

    assert group_backend(device, backend) == expected


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_without_a_gpu_fails_before_joining(monkeypatch):
    from hwnas.train import ddp

    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setattr(ddp.dist, "init_process_group",
                        lambda **kw: pytest.fail("joined a process group before the check"))
    with pytest.raises(ConfigError, match="fit.device: CUDA asked on a CPU machine"):
        ddp.join_group("cuda")


def test_a_rank_exits_with_its_code_and_its_output_flushed(tmp_path: Path) -> None:
    # exit_rank skips interpreter teardown (os._exit), which also skips flushing: a rank's last
    # piped lines (its summary, torchrun's log) must still arrive, and the code must be its own.
    code = ("import sys; from hwnas.train.ddp import exit_rank; print('summary'); "
            "print('warning', file=sys.stderr); exit_rank(3)")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # piped: buffered
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=tmp_path, env={**env, "PYTHONPATH": str(HERE.parents[2])},
                          check=False)
    assert proc.returncode == 3 and proc.stdout == "summary\n" and "warning" in proc.stderr
