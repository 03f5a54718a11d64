"""Structured pruning over every registered space: costs shrink as the ratio says, the pruned
model still runs, trains and round-trips through its shape spec; budgets and bad input."""

from __future__ import annotations

import random

import pytest
import torch

from hw_cost import measure_latency, static_costs
from hwnas.common.errors import ConfigError
from hwnas.compress.prune import IMPORTANCES, PruneConfig, classifier_of, prune
from hwnas.compress.shapes import apply_spec, shape_spec
from search_spaces import get_space, list_spaces

SHAPE = (1, 8, 8)  # digits: small images keep tracing and FLOP counting quick
# Small members of each space that still have every coupling (SE, depthwise, branches, heads);
# a space added later is tested on a random member.
SMALL = {
    "mbconv": "mb:hs-s8-k3e1c8d1se-k3e3c16d1-k5e3c24d1se-k3e3c48d1-k3e3c64d1se",
    "nb201": "|nor_conv_3x3~0|+|skip_connect~0|nor_conv_1x1~1|+|avg_pool_3x3~0|none~1|"
             "nor_conv_3x3~2|",
    "resnet": "rn:s16-d1r2c24-d1r1c32",
    "vit": "vit:p2-e64-d2-h4-m2",
}


def _static(shape: tuple[int, int, int]):  # noqa: ANN202 - a prune Measure
    def measure(model: torch.nn.Module) -> dict[str, float]:
        static = static_costs(model, shape)
        return {"params": float(static["params"]), "macs": float(static["macs"])}

    return measure


def _timed(shape: tuple[int, int, int], opts: dict):  # noqa: ANN001, ANN202 - a prune Measure
    static = _static(shape)

    def measure(model: torch.nn.Module) -> dict[str, float]:
        return {**static(model), "latency_ms": measure_latency(model, shape, **opts).median_ms}

    return measure


def _build(space: str, seed: int = 0, arch: str | None = None):
    sp = get_space(space)
    arch = arch or SMALL.get(space) or sp.random_arch(random.Random(seed))
    torch.manual_seed(seed)
    return sp, arch, sp.build(arch, in_chans=1, num_classes=10, img_size=SHAPE[-1])


@pytest.mark.parametrize("space", list_spaces())
def test_ratio_shrinks_costs_and_model_round_trips(space: str) -> None:
    r = 0.3
    sp, arch, model = _build(space)
    result = prune(model, SHAPE, PruneConfig(ratio=r), measure=_static(SHAPE))
    # Every coupled channel group loses ~r of its width, so weights and MACs scale ~(1-r)^2;
    # the fixed input channels and the kept classifier make the drop a little smaller.
    for key in ("params", "macs"):
        frac = getattr(result.after, key) / getattr(result.before, key)
        assert (1 - r) ** 2 * 0.75 < frac < (1 - r) ** 2 * 1.25, (key, frac)
    assert classifier_of(model, 10).weight.shape[0] == 10
    x = torch.randn(3, *SHAPE)
    model.eval()
    y = model(x)
    assert y.shape == (3, 10) and torch.isfinite(y).all()
    fresh = sp.build(arch, in_chans=1, num_classes=10, img_size=SHAPE[-1])
    spec = shape_spec(model, sp.build(arch, in_chans=1, num_classes=10, img_size=SHAPE[-1]))
    restored = apply_spec(fresh, spec, model.state_dict()).eval()
    torch.testing.assert_close(restored(x), y)


@pytest.mark.parametrize("space", list_spaces())
def test_pruned_model_trains(space: str, digits) -> None:
    from hwnas.train.loop import FitConfig, fit

    _, _, model = _build(space, seed=1)
    prune(model, SHAPE, PruneConfig(ratio=0.5), measure=_static(SHAPE))
    before = [p.detach().clone() for p in model.parameters()]
    res = fit(model, digits, FitConfig(steps=3, batch_size=32, lr=0.01))
    assert res.steps == 3 and torch.isfinite(torch.tensor(res.train_loss))
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


@pytest.mark.parametrize("prune_heads", [False, True])
def test_vit_attention_attributes_follow_qkv(prune_heads: bool) -> None:
    _, _, model = _build("vit", arch="vit:p2-e64-d2-h4-m2")
    prune(model, SHAPE, PruneConfig(ratio=0.5, prune_heads=prune_heads), measure=_static(SHAPE))
    for block in model.blocks:
        a = block.attn
        assert a.qkv.out_features == 3 * a.attn_dim == 3 * a.num_heads * a.head_dim
        assert a.proj.in_features == a.attn_dim
        assert a.scale == pytest.approx(a.head_dim ** -0.5)
        assert (a.num_heads, a.head_dim) == ((2, 16) if prune_heads else (4, 8))
    # timm's unfused attention path reads the same attributes: it must agree with fused SDPA.
    x = torch.randn(2, *SHAPE)
    model.eval()
    fused = model(x)
    for block in model.blocks:
        block.attn.fused_attn = False
    torch.testing.assert_close(model(x), fused, atol=1e-5, rtol=1e-4)


def test_macs_budget_is_met_by_the_least_pruned_step() -> None:
    _, _, model = _build("resnet")
    full = prune(_build("resnet")[2], SHAPE, PruneConfig(ratio=0.05),
                 measure=_static(SHAPE)).before.macs
    budget = 0.5 * full
    res = prune(model, SHAPE, PruneConfig(macs_budget=budget, step=0.1), measure=_static(SHAPE))
    assert res.reached and res.target == "macs"
    assert res.after.macs <= budget
    assert len(res.steps) >= 2 and res.steps[-2].macs > budget  # one step less is over budget
    assert [s.ratio for s in res.steps] == sorted(s.ratio for s in res.steps)


def test_latency_budget_ends_under_budget() -> None:
    # Wide enough that compute, not per-layer overhead, dominates the latency at 28 px.
    _, _, model = _build("resnet", arch="rn:s32-d1r2c48-d1r1c96")
    opts = {"threads": 1, "max_seconds": 0.5}
    shape = (1, 28, 28)
    timed = _timed(shape, opts)
    res = prune(model, shape, PruneConfig(latency_budget_ms=1e9), measure=timed)
    assert res.steps == [] and res.reached  # already under budget: nothing pruned
    budget = 0.75 * res.before.latency_ms
    res = prune(model, shape, PruneConfig(latency_budget_ms=budget, step=0.15), measure=timed)
    assert res.target == "latency" and all(s.latency_ms > 0 for s in res.steps)
    assert res.reached == (res.after.latency_ms <= budget)
    assert res.reached, f"pruning to 90% did not reach {budget:.3f} ms: {res.summary()}"


def _planted_net(dead: dict[int, list[int]]) -> torch.nn.Sequential:
    """conv-bn-relu x2 -> pool -> linear; the output channels in ``dead[i]`` of conv ``i`` carry
    nothing (conv and BN weights and bias zero), so they can be removed without any change."""
    torch.manual_seed(0)
    nn = torch.nn
    net = nn.Sequential(nn.Conv2d(1, 20, 3, padding=1), nn.BatchNorm2d(20), nn.ReLU(),
                        nn.Conv2d(20, 20, 3, padding=1), nn.BatchNorm2d(20), nn.ReLU(),
                        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(20, 10))
    with torch.no_grad():
        for conv_at, channels in dead.items():
            conv, bn = net[conv_at], net[conv_at + 1]
            for t in (conv.weight, conv.bias, bn.weight, bn.bias):
                t[channels] = 0.0
            bn.running_mean[channels] = 0.0
    return net.eval()


@pytest.mark.parametrize("importance", IMPORTANCES.list())
def test_pruning_removes_the_unimportant_channels(importance: str) -> None:
    # 8 of 20 channels per conv carry nothing: ratio 0.4 must remove exactly those, so the
    # pruned net computes what the full one did. Random or inverted ranking breaks this.
    dead = {0: [1, 4, 5, 8, 11, 13, 16, 19], 3: [0, 2, 3, 7, 9, 10, 14, 18]}
    x, y = torch.randn(16, *SHAPE), torch.randint(0, 10, (16,))
    full = _planted_net(dead)
    with torch.no_grad():
        ref = full(x)
    kept = []
    for _ in range(2):
        net = _planted_net(dead)
        res = prune(net, SHAPE, PruneConfig(ratio=0.4, importance=importance),
                    measure=_static(SHAPE), calib=(x, y))
        assert all(p.grad is None for p in net.parameters())
        assert net[0].out_channels == net[3].out_channels == 12
        assert res.after.params < res.before.params and res.after.macs < res.before.macs
        alive = [i for i in range(20) if i not in dead[0]]
        torch.testing.assert_close(net[0].weight, full[0].weight[alive])
        with torch.no_grad():
            torch.testing.assert_close(net.eval()(x), ref, atol=1e-5, rtol=1e-5)
        kept.append({k: v.clone() for k, v in net.state_dict().items()})
    assert all(torch.equal(kept[0][k], kept[1][k]) for k in kept[0])  # deterministic


def test_bad_config_reports_every_problem() -> None:
    with pytest.raises(ConfigError) as err:
        PruneConfig(ratio=1.5, macs_budget=-1, importance="nope", step=0.0).validate()
    text = str(err.value)
    assert len(err.value.problems) == 5
    for part in ("exactly one", "(0, 1)", "macs_budget", "magnitude", "step"):
        assert part in text


def test_taylor_without_calibration_batch_is_an_error() -> None:
    _, _, model = _build("resnet")
    with pytest.raises(ConfigError, match="calibration batch"):
        prune(model, SHAPE, PruneConfig(ratio=0.3, importance="taylor"), measure=_static(SHAPE))


def test_a_latency_budget_follows_the_callers_measure() -> None:
    # A stand-in latency (proportional to the parameters) needs no timing: pruning must stop at
    # the first step under the budget, judged only by what measure reports.
    model = _build("resnet", arch="rn:s32-d1r2c48-d1r1c96")[2]
    static = _static(SHAPE)

    def by_params(m: torch.nn.Module) -> dict[str, float]:
        got = static(m)
        return {**got, "latency_ms": got["params"] / 1e4}

    full = by_params(model)["latency_ms"]
    res = prune(model, SHAPE, PruneConfig(latency_budget_ms=0.6 * full, step=0.1),
                measure=by_params)
    assert res.reached and res.after.latency_ms <= 0.6 * full
    assert all(s.latency_ms > 0.6 * full for s in res.steps[:-1])  # the least-pruned that fits


def test_a_measure_without_latency_is_a_clear_error_for_a_latency_budget() -> None:
    model = _build("resnet")[2]
    with pytest.raises(ConfigError, match="latency_ms"):
        prune(model, SHAPE, PruneConfig(latency_budget_ms=1.0), measure=_static(SHAPE))
