"""Structured pruning with Torch-Pruning (DepGraph) to a ratio, a MACs budget or a latency budget.

Torch-Pruning traces the model once and groups every coupled tensor (a conv's output channels with
the next BN, the depthwise conv that must follow, SE reduce/expand convs, residual adds, ViT
``qkv`` -> ``proj`` and the embedding dimension shared by every block), so one call prunes any
space. Whole heads or head dims of timm ``Attention`` are pruned through ``num_heads={qkv: n}``;
afterwards the module's ``num_heads``, ``head_dim``, ``attn_dim`` and ``scale`` are set from the
new ``qkv`` width (timm 1.0.31 reads all four in ``forward``). The classifier is never pruned.

Budget targets prune in steps of ``step`` (channel ratio) and re-measure after each step, so the
result is the least-pruned model that meets the budget; every step is reported. What a model
costs is the caller's ``measure`` (e.g. ``hw_cost.static_costs`` and ``hw_cost.measure_latency``
on the study's latency settings): pruning knows how to remove channels, not how to time a model.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch_pruning as tp
from torch import nn

from hwnas.common.errors import ConfigError, Problem
from hwnas.common.registry import Registry

IMPORTANCES: Registry[Callable[[], Any]] = Registry("importance")

Measure = Callable[[nn.Module], Mapping[str, float]]
"""A model's costs: ``params`` and ``macs`` per image always, ``latency_ms`` (median) when the
target is a latency budget."""


@IMPORTANCES.register("magnitude")
def _magnitude() -> tp.importance.Importance:
    return tp.importance.GroupMagnitudeImportance(p=2)


@IMPORTANCES.register("taylor")
def _taylor() -> tp.importance.Importance:
    return tp.importance.GroupTaylorImportance()


@dataclass(kw_only=True)
class PruneConfig:
    """What to prune to. Set exactly one of ``ratio``, ``macs_budget``, ``latency_budget_ms``."""

    ratio: float | None = None
    """Share of channels (and head dims) removed from every prunable layer, in (0, 1)."""
    macs_budget: float | None = None
    """Prune until the model needs at most this many multiply-accumulates per image."""
    latency_budget_ms: float | None = None
    """Prune until the median latency that ``measure`` reports is at most this."""
    importance: str = "magnitude"
    """Channel ranking: ``magnitude`` (group L2 norm) or ``taylor`` (needs a calibration batch)."""
    round_to: int | None = 4
    """Keep channel counts multiples of this (hardware-friendly widths); None keeps any count."""
    step: float = 0.05
    """Channel-ratio increment per step for budget targets."""
    max_ratio: float = 0.9
    """Never prune more than this share of any layer."""
    prune_heads: bool = False
    """ViT: remove whole attention heads (True) or shrink every head's dimension (False)."""
    global_pruning: bool = False
    """Rank channels across layers (True) or prune every layer by the same ratio (False)."""

    @property
    def target(self) -> str:
        return next(n for n, v in (("ratio", self.ratio), ("macs", self.macs_budget),
                                   ("latency", self.latency_budget_ms)) if v is not None)

    def validate(self) -> PruneConfig:
        problems = []
        targets = [v for v in (self.ratio, self.macs_budget, self.latency_budget_ms)
                   if v is not None]
        if len(targets) != 1:
            problems.append(Problem("prune target", "set exactly one of ratio, macs_budget, "
                                    "latency_budget_ms", len(targets),
                                    "pass e.g. --prune 0.3 or --latency-budget 2ms alone"))
        if self.ratio is not None and not 0 < self.ratio < 1:
            problems.append(Problem("prune ratio", "must be in (0, 1)", self.ratio,
                                    "use the share of channels to remove, e.g. 0.3"))
        for name in ("macs_budget", "latency_budget_ms"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                problems.append(Problem(name, "must be > 0", value, "give a positive budget"))
        if self.importance not in IMPORTANCES:
            problems.append(Problem("importance", f"must be one of {IMPORTANCES.list()}",
                                    self.importance, "use magnitude or taylor"))
        if not 0 < self.step <= self.max_ratio < 1:
            problems.append(Problem("step/max_ratio", "need 0 < step <= max_ratio < 1",
                                    (self.step, self.max_ratio), "e.g. step=0.05, max_ratio=0.9"))
        if self.round_to is not None and self.round_to < 1:
            problems.append(Problem("round_to", "must be >= 1 or None", self.round_to,
                                    "use 1, 4, 8 or None"))
        if problems:
            raise ConfigError(problems)
        return self


@dataclass
class PruneStep:
    ratio: float
    params: int
    macs: float
    latency_ms: float | None = None


@dataclass
class PruneResult:
    """The pruned model (pruned in place) with its costs before, after and at every step."""

    model: nn.Module
    target: str
    before: PruneStep
    after: PruneStep
    steps: list[PruneStep]
    reached: bool

    def summary(self) -> dict[str, Any]:
        return {"target": self.target, "reached": self.reached, "before": asdict(self.before),
                "after": asdict(self.after), "steps": [asdict(s) for s in self.steps]}


def classifier_of(model: nn.Module, num_classes: int) -> nn.Module:
    """The output layer, which keeps its width: timm's ``get_classifier`` or the last layer whose
    output width is ``num_classes``."""
    get = getattr(model, "get_classifier", None)
    head = get() if callable(get) else None
    if isinstance(head, nn.Linear | nn.Conv2d):
        return head
    for module in reversed(list(model.modules())):
        width = getattr(module, "out_features", getattr(module, "out_channels", None))
        if isinstance(module, nn.Linear | nn.Conv2d) and width == num_classes:
            return module
    raise ConfigError.one("prune", "model needs a Linear/Conv2d classifier with num_classes "
                          "outputs", type(model).__name__, "build the model with a classifier head")


def _attention_modules(model: nn.Module) -> list[nn.Module]:
    # Duck-typed on timm's Attention (qkv Linear + num_heads) so ViT variants work too.
    return [m for m in model.modules()
            if isinstance(getattr(m, "qkv", None), nn.Linear) and hasattr(m, "num_heads")]


def _sync_attention(pruner: tp.pruner.BasePruner, attns: list[nn.Module]) -> None:
    for m in attns:
        m.num_heads = pruner.num_heads[m.qkv]
        m.head_dim = m.qkv.out_features // (3 * m.num_heads)
        m.attn_dim = m.num_heads * m.head_dim
        # The fused SDPA path scales by 1/sqrt(head_dim) itself; keep the manual path identical.
        m.scale = m.head_dim ** -0.5


def costs(model: nn.Module, measure: Measure, cfg: PruneConfig, ratio: float) -> PruneStep:
    """One step's params, MACs and, for a latency target, latency, as ``measure`` reports them."""
    got = measure(model)
    missing = [k for k in ("params", "macs") if k not in got]
    if cfg.latency_budget_ms is not None and "latency_ms" not in got:
        missing.append("latency_ms")
    if missing:
        raise ConfigError.one("prune measure", "must report params and macs (and latency_ms for "
                              "a latency budget)", sorted(got), f"add {missing} to what it returns")
    latency = got.get("latency_ms") if cfg.latency_budget_ms is not None else None
    return PruneStep(ratio=round(ratio, 4), params=int(got["params"]), macs=float(got["macs"]),
                     latency_ms=None if latency is None else float(latency))


def _taylor_grads(model: nn.Module, calib: tuple[torch.Tensor, torch.Tensor]) -> None:
    model.zero_grad()
    x, y = calib
    nn.functional.cross_entropy(model(x), y).backward()


def _met(cfg: PruneConfig, now: PruneStep) -> bool:
    if cfg.macs_budget is not None:
        return now.macs <= cfg.macs_budget
    if cfg.latency_budget_ms is not None:
        return now.latency_ms is not None and now.latency_ms <= cfg.latency_budget_ms
    return True


def prune(model: nn.Module, input_shape: tuple[int, int, int], cfg: PruneConfig, *,
          measure: Measure, calib: tuple[torch.Tensor, torch.Tensor] | None = None
          ) -> PruneResult:
    """Prune ``model`` in place to ``cfg``'s target, re-measuring with ``measure`` after each
    step; ``calib=(x, y)`` feeds Taylor importance."""
    cfg.validate()
    if cfg.importance == "taylor" and calib is None:
        raise ConfigError.one("prune importance", "taylor needs a calibration batch", "taylor",
                              "pass calib=(x, y) or use importance='magnitude'")
    was_training = model.training
    model.eval()  # tracing and counting must not update BN statistics
    device = next(model.parameters()).device
    example = torch.randn(1, *input_shape, device=device)
    num_classes = model(example).shape[-1]
    attns = _attention_modules(model)
    budget = cfg.ratio is None
    steps_total = max(1, round(cfg.max_ratio / cfg.step)) if budget else 1
    with warnings.catch_warnings():
        # Torch-Pruning warns about ViT's cls_token/pos_embed, which it handles correctly.
        warnings.filterwarnings("ignore", message=".*[Uu]nwrapped parameters.*")
        pruner = tp.pruner.BasePruner(
            model, example, importance=IMPORTANCES.get(cfg.importance)(),
            pruning_ratio=cfg.max_ratio if budget else cfg.ratio, iterative_steps=steps_total,
            global_pruning=cfg.global_pruning, round_to=cfg.round_to,
            ignored_layers=[classifier_of(model, num_classes)],
            num_heads={m.qkv: m.num_heads for m in attns}, prune_num_heads=cfg.prune_heads,
            prune_head_dims=not cfg.prune_heads,
            head_pruning_ratio=(cfg.ratio or cfg.max_ratio) if cfg.prune_heads else 0.0)
    before = costs(model, measure, cfg, 0.0)
    now, steps = before, []
    for i in range(1, steps_total + 1):
        if budget and _met(cfg, now):
            break
        if calib is not None and cfg.importance == "taylor":
            _taylor_grads(model, calib)
        pruner.step()
        _sync_attention(pruner, attns)
        now = costs(model, measure, cfg, pruner.per_step_pruning_ratio[i])
        steps.append(now)
    model.zero_grad(set_to_none=True)
    model.train(was_training)
    reached = _met(cfg, now)
    if not reached:
        warnings.warn(f"pruning stopped at max_ratio={cfg.max_ratio} above the {cfg.target} "
                      f"budget: {now}", stacklevel=2)
    return PruneResult(model=model, target=cfg.target, before=before, after=now, steps=steps,
                       reached=reached)
