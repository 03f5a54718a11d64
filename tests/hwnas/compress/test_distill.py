"""Distillation losses: the formulas, a frozen teacher, training through ``fit``."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from hwnas.common.errors import ConfigError
from hwnas.compress.distill import DistillConfig, Distiller, hard_loss, kd_loss, make_loss


def _logits(seed: int, n: int = 16, k: int = 10) -> torch.Tensor:
    return torch.randn(n, k, generator=torch.Generator().manual_seed(seed)) * 3


def test_kd_loss_matches_hinton_formula() -> None:
    s, t, y = _logits(0), _logits(1), torch.randint(0, 10, (16,))
    a, temp = 0.3, 4.0
    p_t = F.softmax(t / temp, dim=-1)
    kl = (p_t * (p_t.log() - F.log_softmax(s / temp, dim=-1))).sum(-1).mean()
    want = a * F.cross_entropy(s, y) + (1 - a) * temp ** 2 * kl
    torch.testing.assert_close(kd_loss(s, t, y, alpha=a, temperature=temp), want)


def test_kd_limits() -> None:
    s, t, y = _logits(0), _logits(1), torch.randint(0, 10, (16,))
    torch.testing.assert_close(kd_loss(s, t, y, alpha=1.0, temperature=4.0),
                               F.cross_entropy(s, y))
    # A student equal to its teacher has nothing left to learn from it.
    assert kd_loss(t, t, y, alpha=0.0, temperature=2.0).abs() < 1e-6


def test_hard_loss_uses_teacher_labels_and_the_distillation_head() -> None:
    s, t, y = _logits(0), _logits(1), torch.randint(0, 10, (16,))
    torch.testing.assert_close(hard_loss(s, t, y, alpha=0.0),
                               F.cross_entropy(s, t.argmax(-1)))
    cls_out, dist_out = _logits(2), _logits(3)
    want = 0.5 * F.cross_entropy(cls_out, y) + 0.5 * F.cross_entropy(dist_out, t.argmax(-1))
    torch.testing.assert_close(hard_loss((cls_out, dist_out), t, y, alpha=0.5), want)


def _mlp(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.BatchNorm1d(32), nn.ReLU(),
                         nn.Linear(32, 10))


@pytest.mark.parametrize("mode", ["soft", "hard"])
def test_distilled_fit_leaves_the_teacher_untouched(mode: str, digits) -> None:
    from hwnas.train.loop import FitConfig, fit

    teacher, student = _mlp(0), _mlp(1)
    teacher.train()  # Distiller must switch it to eval (BN statistics frozen)
    frozen = {k: v.clone() for k, v in teacher.state_dict().items()}
    loss = Distiller(teacher, DistillConfig(mode=mode, alpha=0.5))
    res = fit(student, digits, FitConfig(steps=20, batch_size=64, lr=0.05), loss_fn=loss)
    assert not teacher.training and all(not p.requires_grad for p in teacher.parameters())
    for k, v in teacher.state_dict().items():
        assert torch.equal(v, frozen[k]), k
    assert res.steps == 20 and res.history[-1]["train_loss"] < 2.3


def test_distilled_vit_head(digits) -> None:
    from timm.models.deit import VisionTransformerDistilled

    vit = VisionTransformerDistilled(img_size=8, patch_size=2, in_chans=1, num_classes=10,
                                     embed_dim=32, depth=1, num_heads=2)
    vit.set_distilled_training(True)
    x, y = digits.x_train[:8], digits.y_train[:8]
    out = vit.train()(x)
    assert isinstance(out, tuple) and len(out) == 2
    loss = Distiller(_mlp(0), DistillConfig(mode="hard"))(out, y, x)
    loss.backward()
    assert vit.head_dist.weight.grad.abs().sum() > 0 and vit.head.weight.grad.abs().sum() > 0


def test_make_loss_builds_the_teacher_through_its_factory(tmp_path, digits) -> None:
    from search_spaces import get_space
    from search_spaces.checkpoint import save_checkpoint

    arch = "rn:s16-d1r1c16"
    torch.manual_seed(3)
    teacher = get_space("resnet").build(arch, in_chans=1, num_classes=10, img_size=8).eval()
    save_checkpoint(tmp_path / "teacher.pt", space="resnet", arch=arch,
                    state_dict=teacher.state_dict(),
                    data={"name": "digits", "in_chans": 1, "num_classes": 10, "img_size": 8})
    loss_fn = make_loss(teacher_factory="search_spaces.checkpoint:load_model",
                        teacher_kwargs={"path": str(tmp_path / "teacher.pt")}, alpha=0.0,
                        temperature=1.0)
    x, y = digits.x_train[:8], digits.y_train[:8]
    with torch.no_grad():
        t = teacher(x)
    torch.testing.assert_close(loss_fn(t, y, x), torch.tensor(0.0), atol=1e-6, rtol=0)


def _kl_to_teacher(student: nn.Module, teacher: nn.Module, x: torch.Tensor) -> float:
    with torch.no_grad():
        t = F.softmax(teacher.eval()(x), -1)
        return F.kl_div(F.log_softmax(student.eval()(x), -1), t, reduction="batchmean").item()


def test_distillation_moves_the_student_toward_the_teacher(digits) -> None:
    # Same student start, same steps: learning from the teacher's soft outputs (alpha=0) must
    # end closer to the teacher than learning the labels; a distiller that ignored the
    # teacher would not.
    from hwnas.train.loop import FitConfig, fit

    teacher = _mlp(0)
    fit(teacher, digits, FitConfig(epochs=3, lr=0.05, augment=False, seed=0))
    cfg = FitConfig(steps=60, batch_size=64, lr=0.05, augment=False, seed=1)
    plain, taught = _mlp(1), _mlp(1)
    fit(plain, digits, cfg)
    fit(taught, digits, cfg, loss_fn=Distiller(teacher, DistillConfig(alpha=0.0, temperature=4)))
    x = digits.x_test
    kl_plain, kl_taught = _kl_to_teacher(plain, teacher, x), _kl_to_teacher(taught, teacher, x)
    assert kl_taught < 0.7 * kl_plain, (kl_taught, kl_plain)


def test_bad_distill_config_reports_every_problem() -> None:
    with pytest.raises(ConfigError) as err:
        DistillConfig(mode="medium", alpha=2.0, temperature=0.0).validate()
    assert len(err.value.problems) == 3
    assert "soft" in str(err.value) and "[0, 1]" in str(err.value)


@pytest.mark.parametrize("hw", ["pcm", "digital"])
def test_hwa_fit_trains_the_student_on_the_distillation_loss(digits, hw: str) -> None:
    import analog
    from hwnas.train.loop import FitConfig
    from search_spaces import get_space

    def net(seed: int):
        torch.manual_seed(seed)
        return get_space("resnet").build("rn:s16-d1r1c16", in_chans=1, num_classes=10,
                                         img_size=8)

    teacher, student = net(0), net(1)
    start = {k: v.clone() for k, v in student.state_dict().items()}
    distiller, calls = Distiller(teacher), []

    def loss_fn(logits, targets, inputs):  # noqa: ANN001, ANN202 - counts the distiller's calls
        calls.append(len(targets))
        return distiller(logits, targets, inputs)

    res = analog.hwa_fit(student, digits, hw, FitConfig(steps=5, batch_size=64, lr=0.01),
                         loss_fn=loss_fn)
    assert res.steps == 5 and torch.isfinite(torch.tensor(res.train_loss))
    assert len(calls) >= 5  # every training step took its loss from the teacher
    assert any(not torch.equal(start[k], v) for k, v in student.state_dict().items())
