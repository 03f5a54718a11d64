"""Data-parallel supernet training under torchrun: two gloo ranks on CPU end with the weights a
single process gets by averaging the two shards' sandwich gradients (a brute-force reference)."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
import torch

from hwnas.common.errors import ConfigError
from hwnas.train.supernet import (
    SupernetTrainConfig,
    _batch,
    _optimizer,
    _step_seed,
    clip_bank,
    hwa_noise_at,
    load_data_for,
    read_checkpoint,
    sandwich_step,
    train_supernet,
)
from nas.cli import main
from search_spaces.supernet import build_supernet

CFG = SupernetTrainConfig(space="resnet", data="digits", train_limit=256, steps=3, batch_size=8,
                          k=1, warmup_steps=1, hwa_noise=0.05)


def _reference(cfg: SupernetTrainConfig, world: int) -> dict[str, torch.Tensor]:
    """What ``world`` ranks compute, in one process: per step, each shard's sandwich gradient
    (same sub-networks, same noise), averaged, then one optimizer step."""
    data = load_data_for(cfg)
    torch.manual_seed(cfg.seed)
    net = build_supernet(cfg.space, in_chans=data.in_chans, num_classes=data.num_classes,
                         img_size=data.img_size)
    opt, sched = _optimizer(net, cfg)
    params = list(net.parameters())
    for step in range(cfg.steps):
        net.train()
        net.weight_noise = hwa_noise_at(cfg, step)
        x, y = _batch(data, cfg, step)
        total: list[torch.Tensor | None] = [None] * len(params)
        for rank in range(world):
            opt.zero_grad(set_to_none=True)
            with torch.random.fork_rng():
                torch.manual_seed(_step_seed(cfg.seed, step))
                sandwich_step(net, x[rank::world], y[rank::world], cfg,
                              random.Random(_step_seed(cfg.seed, step)))
            total = [t if p.grad is None else p.grad.clone() if t is None else t + p.grad
                     for t, p in zip(total, params, strict=True)]
        for t, p in zip(total, params, strict=True):
            p.grad = None if t is None else t / world
        opt.step()
        clip_bank(net, cfg, step)
        sched.step()
    return {k: v for k, v in net.state_dict().items() if k.startswith("params.")}


@pytest.fixture(autouse=True)
def _one_thread():
    # the ranks run one thread each; float sums differ between thread counts
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.slow
def test_two_ranks_match_the_averaged_shards(tmp_path):
    out = tmp_path / "ddp.pt"
    code = main(["supernet", "train", "resnet", "--data", "digits", "--train-limit", "256",
                 "--steps", "3", "--batch-size", "8", "--k", "1", "--warmup-steps", "1",
                 "--hwa-noise", "0.05", "--out", str(out), "--threads", "1", "--nproc", "2"])
    assert code == 0
    ck = read_checkpoint(out, space="resnet")
    assert ck["step"] == 3
    ref = _reference(CFG, world=2)
    got = {k: v for k, v in ck["state_dict"].items() if k in ref}
    assert got.keys() == ref.keys()
    for key in ref:
        torch.testing.assert_close(got[key], ref[key], rtol=1e-6, atol=1e-7, msg=key)
    # and the shards matter: one process on the whole batch ends elsewhere
    single = _reference(CFG, world=1)
    assert any(not torch.allclose(single[k], ref[k], atol=1e-6) for k in ref)


def test_batch_that_does_not_split_over_the_ranks(monkeypatch, tmp_path):
    import hwnas.train.ddp as ddp
    import hwnas.train.supernet as recipe

    monkeypatch.setattr(recipe, "join_group", lambda *a, **k: ddp.Dist(rank=0, world=3))
    with pytest.raises(ConfigError, match="must split into 3 equal shards"):
        train_supernet(replace(CFG, batch_size=8), tmp_path / "x.pt", build=build_supernet)


def test_bad_nproc(capsys):
    assert main(["supernet", "train", "resnet", "--nproc", "0"]) == 2
    assert "--nproc: must be an integer >= 1" in capsys.readouterr().err
