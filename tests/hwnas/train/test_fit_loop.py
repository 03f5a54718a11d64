"""The training loop: learns digits, reproduces under a seed, hooks, budgets, bad input."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from datagen import tiny_cnn

from hwnas.common.errors import ConfigError
from hwnas.train.data import load_data
from hwnas.train.loop import (
    FitConfig,
    NonFiniteLoss,
    build_optimizer,
    build_scheduler,
    channels_last_convs,
    evaluate,
    fit,
)


@pytest.fixture(scope="module")
def digits():
    return load_data("digits", seed=0)


def _model(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return tiny_cnn()


def test_fit_learns_digits(digits):
    model = _model()
    result = fit(model, digits, FitConfig(epochs=6, batch_size=64, lr=0.1, label_smoothing=0.1))
    test = evaluate(model, digits.x_test, digits.y_test)
    assert test["acc"] > 0.8 and result.val_acc > 0.8
    assert result.steps == 6 * (len(digits.y_train) // 64)
    assert len(result.history) == 6 and result.history[-1]["train_loss"] < result.history[0][
        "train_loss"]
    assert result.images_per_s > 0 and 0 < result.train_seconds <= result.seconds
    assert not model.training


def test_fit_learns_with_a_search_space_model(digits):
    from search_spaces import get_space

    torch.manual_seed(0)
    model = get_space("resnet").build("rn:s16-d1r1c16-d1r1c32", in_chans=1, num_classes=10,
                                      img_size=8)
    fit(model, digits, FitConfig(epochs=6, batch_size=64, lr=0.1, warmup_epochs=0.5))
    assert evaluate(model, digits.x_test, digits.y_test)["acc"] > 0.8


def test_adamw_learns(digits):
    model = _model()
    fit(model, digits, FitConfig(epochs=5, batch_size=64, optimizer="adamw", lr=1e-2))
    assert evaluate(model, digits.x_test, digits.y_test)["acc"] > 0.8


def test_same_seed_same_weights_and_history(digits):
    cfg = FitConfig(epochs=2, batch_size=64, seed=4)
    a, b = _model(), _model()
    ra, rb = fit(a, digits, cfg), fit(b, digits, cfg)
    assert [h["train_loss"] for h in ra.history] == [h["train_loss"] for h in rb.history]
    for pa, pb in zip(a.state_dict().values(), b.state_dict().values(), strict=True):
        assert torch.equal(pa, pb)
    c = _model()
    rc = fit(c, digits, FitConfig(epochs=2, batch_size=64, seed=5))
    assert rc.history[0]["train_loss"] != ra.history[0]["train_loss"]


@pytest.mark.parametrize("validate", ["end", "off"])
def test_validation_passes_change_nothing_but_the_history(digits, validate):
    cfg = FitConfig(epochs=3, batch_size=64, seed=1)
    every, fewer = _model(), _model()
    ra = fit(every, digits, cfg)
    rb = fit(fewer, digits, FitConfig(epochs=3, batch_size=64, seed=1, validation=validate))
    for pa, pb in zip(every.state_dict().values(), fewer.state_dict().values(), strict=True):
        assert torch.equal(pa, pb)  # the same training: validation is read-only
    assert [h["train_loss"] for h in ra.history] == [h["train_loss"] for h in rb.history]
    scored = [h for h in rb.history if not math.isnan(h["val_acc"])]
    assert len(scored) == (1 if validate == "end" else 0) and not fewer.training
    assert (rb.val_acc == ra.val_acc) if validate == "end" else math.isnan(rb.val_acc)


def test_fit_leaves_the_callers_rng_alone(digits):
    torch.manual_seed(123)
    expected = torch.rand(3)
    model = _model()
    torch.manual_seed(123)
    fit(model, digits, FitConfig(steps=2, batch_size=32))
    assert torch.equal(torch.rand(3), expected)


@pytest.mark.parametrize(("cfg", "steps"), [
    (FitConfig(steps=7, batch_size=100), 7),
    (FitConfig(epochs=0.5, batch_size=100), math.ceil(0.5 * 12)),
    (FitConfig(epochs=2.5, batch_size=100), math.ceil(2.5 * 12)),
])
def test_budget_in_steps_or_fractional_epochs(digits, cfg, steps):
    assert len(digits.y_train) // 100 == 12
    result = fit(_model(), digits, cfg)
    assert result.steps == steps
    assert result.epochs == pytest.approx(steps / 12)
    assert result.history[-1]["step"] == steps


def test_hooks_replace_loss_and_optimizer_and_run_after_each_step(digits):
    calls = {"loss": 0, "hook": 0}

    def loss_fn(logits, targets, inputs):
        calls["loss"] += 1
        assert inputs.shape[0] == logits.shape[0] == targets.shape[0]
        return F.cross_entropy(logits, targets)

    def clip(model):
        calls["hook"] += 1
        with torch.no_grad():
            for p in model.parameters():
                p.clamp_(-0.05, 0.05)

    model = _model()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    fit(model, digits, FitConfig(steps=5, batch_size=32), loss_fn=loss_fn, optimizer=opt,
        step_hook=clip)
    assert calls == {"loss": 5, "hook": 5}
    bound = torch.tensor(0.05)  # the float32 value clamp_ used
    assert all(bool(p.detach().abs().max() <= bound) for p in model.parameters())
    assert len(opt.state) > 0  # the given optimizer did the steps


def test_nan_loss_names_the_step_and_suggests_a_lower_lr(digits):
    steps = []

    def loss_fn(logits, targets, inputs):
        steps.append(1)
        loss = F.cross_entropy(logits, targets)
        return loss * math.nan if len(steps) == 3 else loss

    with pytest.raises(NonFiniteLoss) as err:
        fit(_model(), digits, FitConfig(steps=10, batch_size=32, lr=0.05), loss_fn=loss_fn)
    msg = str(err.value)
    assert "step 3" in msg and "nan" in msg and "lower the learning rate" in msg and "0.05" in msg
    assert len(steps) == 3  # stopped at once, not at the end of the epoch


def test_divergent_lr_is_a_clear_error(digits):
    # Two stacked linear layers without normalization: their updates feed each other.
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 32),
                                torch.nn.Linear(32, 10))
    with pytest.raises(NonFiniteLoss, match="lower the learning rate"):
        fit(model, digits, FitConfig(epochs=3, batch_size=32, lr=1e6, weight_decay=0.0))


def test_warmup_then_cosine_schedule():
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    sched = build_scheduler(opt, total_steps=100, warmup_steps=10)
    lrs = []
    for _ in range(100):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert lrs[0] < lrs[5] < lrs[10] == pytest.approx(1.0)
    assert all(a >= b for a, b in zip(lrs[10:], lrs[11:], strict=False))
    assert lrs[-1] < 0.01


def test_weight_decay_skips_norms_and_biases():
    opt = build_optimizer(_model(), FitConfig(weight_decay=0.1))
    decayed, plain = opt.param_groups
    assert decayed["weight_decay"] == 0.1 and plain["weight_decay"] == 0.0
    assert all(p.ndim > 1 for p in decayed["params"]) and all(p.ndim == 1 for p in plain["params"])
    assert opt.defaults["nesterov"]


def test_evaluate_reports_acc_and_loss(digits):
    model = _model()
    model.train()
    out = evaluate(model, digits.x_test, digits.y_test, batch_size=50)
    assert 0 <= out["acc"] <= 1 and out["loss"] > 0 and not model.training
    empty = evaluate(model, digits.x_test[:0], digits.y_test[:0])
    assert math.isnan(empty["acc"])


@pytest.mark.parametrize("channels_last", [True, False])
def test_channels_last_convs_on_any_device(digits, channels_last):
    model = _model()
    fit(model, digits, FitConfig(steps=2, batch_size=32, channels_last=channels_last))
    weight = model[3].weight  # a 16-channel conv: the two formats differ
    assert weight.is_contiguous(memory_format=torch.channels_last) == channels_last
    assert weight.is_contiguous() != channels_last


class _RefusingConv(torch.nn.Conv2d):
    """Stands for a layer (like an aihwkit tile) that refuses a memory-format change."""

    def to(self, *args, **kwargs):
        if "memory_format" in kwargs:
            raise RuntimeError("this tile cannot change its memory format")
        return super().to(*args, **kwargs)


def test_layers_that_refuse_channels_last_are_left_alone(digits):
    model = _model()
    model[3] = _RefusingConv(16, 32, 3, padding=1, stride=2)
    result = fit(model, digits, FitConfig(epochs=2, batch_size=64))
    assert math.isfinite(result.train_loss)
    assert model[3].weight.is_contiguous()  # left as it was
    assert channels_last_convs(model) == torch.channels_last  # the other convs still convert


def test_default_lr_follows_the_optimizer():
    assert FitConfig().lr == 0.1 and FitConfig(optimizer="adamw").lr == 1e-3


def test_bad_config_lists_every_problem():
    with pytest.raises(ConfigError) as err:
        FitConfig(epochs=0, lr=-1.0, optimizer="adam")
    assert len(err.value.problems) == 3
    msg = str(err.value)
    for part in ("FitConfig.epochs", "FitConfig.lr", "FitConfig.optimizer", "'adam'", "Fix:"):
        assert part in msg


@pytest.mark.parametrize("kwargs", [
    {"batch_size": 0}, {"steps": 0}, {"momentum": 1.0}, {"label_smoothing": -0.1},
    {"warmup_epochs": -1}, {"weight_decay": -1e-4}, {"epochs": "many"}, {"device": "tpu"},
    {"validation": "sometimes"},
])
def test_each_bad_field_is_one_clear_problem(kwargs):
    with pytest.raises(ConfigError) as err:
        FitConfig(**kwargs)
    (problem,) = err.value.problems
    assert problem.where == f"FitConfig.{next(iter(kwargs))}" and problem.fix


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only message")
def test_cuda_on_a_cpu_machine_is_a_config_error():
    with pytest.raises(ConfigError, match="--device cpu"):
        FitConfig(device="cuda")


@pytest.mark.gpu
def test_fit_on_cuda_with_amp_and_channels_last(digits):
    model = _model()
    result = fit(model, digits, FitConfig(epochs=5, batch_size=64, device="cuda"))
    assert result.val_acc > 0.8 and math.isfinite(result.train_loss)
    conv = model[0]
    assert conv.weight.is_contiguous(memory_format=torch.channels_last)


def test_study_train_config_is_fit_config() -> None:
    # One training config: the study file's TrainCfg has FitConfig's fields (the seed is the
    # study's) and the same defaults, so a study and a library call train alike.
    from dataclasses import fields

    from hwnas.train.loop import FitConfig
    from nas.study.config import TrainCfg

    fit = {f.name: f.default for f in fields(FitConfig) if f.name != "seed"}
    # threads is the study's own: how many CPU threads a trial runs on, not a training setting;
    # a study scores every candidate itself after training, so it skips fit's val passes
    study = {k: f.default for k, f in TrainCfg.model_fields.items() if k != "threads"}
    assert study == {**fit, "validation": "off"}


@pytest.mark.parametrize("tf32", [False, True])
def test_fit_sets_tf32_explicitly_and_restores_it(tf32: bool) -> None:
    # cuDNN defaults to TF32, so fp32 training must set it; the switches are global, so fit
    # restores the caller's. The flags exist (and are read by CUDA kernels) on CPU builds too.
    from hwnas.common.devices import set_tf32, tf32_state
    from hwnas.train.data import load_data
    from hwnas.train.loop import FitConfig, fit

    seen = []
    before = set_tf32(not tf32)
    try:
        data = load_data("digits", train_limit=64)
        model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 10))
        fit(model, data, FitConfig(steps=2, batch_size=32, tf32=tf32, validation="off"),
            step_hook=lambda _m: seen.append(tf32_state()))
        assert seen and all(s == {"matmul": tf32, "cudnn": tf32} for s in seen)
        assert tf32_state() == {"matmul": not tf32, "cudnn": not tf32}
    finally:
        set_tf32(before["matmul"])
