"""One candidate, scored: cost -> budgets -> proxy training -> accuracy under hardware models.

``Evaluator(cfg).evaluate(arch)`` is the whole recipe, shared by the Optuna and Ray drivers:

1. **cost** (``hw_cost.cost_of``, cached by arch and device) or a table row in tabular mode;
2. **early budgets** on cost metrics: a violated budget stops here, so an infeasible candidate
   costs only a measurement (its accuracy objectives get the metric's worst value);
3. **proxy training** with ``hwnas.train.loop.fit`` on the study's budget;
4. **accuracy** digitally and under every hardware model the objectives and budgets name, at
   their drift times (``analog.evaluate``: mean and std over repeats, plus analog coverage);
5. late budgets (on accuracy), objective values; a NaN anywhere fails the trial with a reason.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

import analog
from analog.precision import sampling_se
from hwnas.common.errors import ConfigError, HwnasError
from hwnas.common.seeds import TrialSeeds
from hwnas.common.threads import torch_threads
from hwnas.train.data import DataSplits, load_data
from hwnas.train.fit_config import FitConfig
from hwnas.train.loop import evaluate, fit
from nas.scoring import glue
from nas.scoring.continuation import RungStore, fit_rung
from nas.scoring.supernet import inherited_model
from nas.study.checks import resolve_path
from nas.study.config import StudyConfig
from nas.study.hardware import Hardware, from_choice
from nas.study.mapping import describe, digital_patterns, fixed_choice
from nas.study.objectives import Budget, Objective
from nas.study.schedule import rung_budgets, rung_precision
from nas.study.table import TabularEvaluator
from search_spaces import SearchSpace


class TrialFailed(HwnasError):
    """A candidate that cannot be scored (NaN metric, diverged training); the study goes on."""


@dataclass
class Outcome:
    """Everything one evaluation produced."""

    arch: str
    metrics: dict[str, float]
    info: dict[str, Any] = field(default_factory=dict)
    constraints: dict[str, float] = field(default_factory=dict)
    feasible: bool = True
    values: list[float] = field(default_factory=list)
    state_dict: dict[str, Any] | None = None


class Evaluator:
    """Scores arch strings for one study; loads the data set once per process."""

    def __init__(self, cfg: StudyConfig):
        self.cfg = cfg
        self.objectives: list[Objective] = cfg.objectives_resolved()
        self.budgets: list[Budget] = cfg.budgets()
        self.table = (TabularEvaluator(resolve_path(cfg.tabular.path), key=cfg.tabular.key,
                                       columns=cfg.tabular.columns) if cfg.tabular else None)
        self._space: SearchSpace | None = None
        self.rungs: RungStore | None = None
        """Where rung states are saved and continued from (successive halving on epochs; the
        driver sets it to ``runs/<study>/rungs``). None: a promotion retrains from step 0, to
        the same weights (``nas.scoring.continuation``)."""

    # -- shared state -----------------------------------------------------------------------
    @property
    def space(self) -> SearchSpace:
        if self._space is None:
            self._space = self.cfg.search_space()
        return self._space

    @functools.cached_property
    def data(self) -> DataSplits:
        d = self.cfg.data
        return load_data(d.name, root=d.root, val_fraction=d.val_fraction, seed=d.seed,
                         train_limit=d.train_limit, test_limit=d.test_limit, **d.options)

    def prepare(self) -> None:
        """Load what every trial needs (space, data set) now, so set-up errors surface once."""
        self.space  # noqa: B018 - resolves the space
        if self.table is None:
            self.data  # noqa: B018 - loads and caches the data set
            self._check_adabs()

    def _check_adabs(self) -> None:
        """AdaBS draws its images from the training split: it must hold that many."""
        he, n = self.cfg.hw_eval, len(self.data.x_train)
        if he.adabs > n and any(analog.get_hw(hw).kind == "analog" for hw in self.hw_times()):
            raise ConfigError.one(
                "hw_eval.adabs", f"must not exceed the training split ({n} images)", he.adabs,
                f"set hw_eval.adabs <= {n}, or raise data.train_limit")

    def hw_times(self) -> dict[str, list[str | None]]:
        """Hardware models to score and their drift times (digital always, for the report)."""
        need: dict[str, list[str | None]] = {"digital": [None]}
        for item in [*self.objectives, *self.budgets]:
            if item.metric.uses_hw and item.hw != "digital":
                times = need.setdefault(item.hw, [])
                if item.time not in times:
                    times.append(item.time)
        return need

    # -- the recipe -------------------------------------------------------------------------
    def evaluate(self, arch: str, *,
                 on_constraints: Callable[[dict[str, float]], None] | None = None,
                 budget: float | None = None, mapping: dict[str, int] | None = None) -> Outcome:
        """``budget`` (successive halving) overrides the proxy training's
        ``cfg.schedule.resource``: epochs, or training images. ``mapping``: the trial's
        layer-wise mapping (``nas.search.sampling.choose``; required when the study searches it)."""
        self.space.validate(arch)
        out = Outcome(arch, {})
        t0 = time.perf_counter()
        out.metrics, out.info = self._cost(arch)
        hardware = from_choice(mapping)
        if hardware is not None:  # one string per chip, stored beside the arch string
            out.info["hardware"] = hardware.code
        digital = self._map(arch, mapping, out.metrics, out.info, hardware)
        out.info["seconds_cost"] = round(time.perf_counter() - t0, 3)
        out.constraints = self._violations([b for b in self.budgets if b.early], out.metrics)
        if on_constraints and out.constraints:
            on_constraints(out.constraints)
        if any(v > 0 for v in out.constraints.values()):
            out.feasible = False
            out.info["skipped"] = "a cost budget is violated: not trained"
            out.values = [self._value(o, out.metrics, infeasible=True) for o in self.objectives]
            return out
        t1 = time.perf_counter()
        if self.table is None:
            out.state_dict = self._train_and_score(arch, out.metrics, out.info, budget, digital,
                                                   hardware)
        out.info["seconds_train_eval"] = round(time.perf_counter() - t1, 3)
        late = self._violations([b for b in self.budgets if not b.early], out.metrics)
        if on_constraints and late:
            on_constraints(late)
        out.constraints.update(late)
        out.feasible = all(v <= 0 for v in out.constraints.values())
        out.values = [self._value(o, out.metrics) for o in self.objectives]
        return out

    def _cost(self, arch: str) -> tuple[dict[str, float], dict[str, Any]]:
        if self.table is not None:
            return self.table.lookup(arch), {"source": f"table {self.table.path.name}"}
        return glue.costs(self.cfg, self.space.name, arch, self.data.input_shape,
                          self.data.num_classes)

    def _map(self, arch: str, choice: dict[str, Any] | None, metrics: dict[str, float],
             info: dict[str, Any], hardware: Hardware | None = None) -> list[str]:
        """Layers kept digital under the mapping; the analog cost metrics follow them."""
        mcfg = self.cfg.hw_eval.mapping_cfg
        if not mcfg.active or self.table is not None:
            return []
        choice = fixed_choice(mcfg) if choice is None else choice
        model = self.build(arch)
        digital = digital_patterns(model, choice, mcfg)
        metrics.update(glue.mapped_costs(self.cfg, model, self.data.input_shape, digital,
                                         hardware))
        metrics.update({f"mapping.{k}": float(v) for k, v in choice.items()
                        if not k.startswith("hw.")})
        info["mapping"] = describe(choice, digital)
        if hardware is not None:  # what the energy estimate charged: the sampled chip
            info["analog_cost_hw"] = hardware.scored_hw(info.get("analog_cost_hw") or "")
            info["analog_cost_options"] = json.dumps(hardware.cost_options(), sort_keys=True)
            info["analog_read_mode"] = hardware.read_mode
        return digital

    def _violations(self, budgets: list[Budget], metrics: dict[str, float]) -> dict[str, float]:
        out = {}
        for b in budgets:
            if b.key not in metrics:
                raise TrialFailed(f"budget {b.describe()}: metric {b.key} was not measured")
            out[b.key] = b.violation(metrics[b.key])
        return out

    def _value(self, o: Objective, metrics: dict[str, float], infeasible: bool = False) -> float:
        if infeasible and o.key not in metrics:
            return float(o.metric.worst if o.metric.worst is not None else math.inf)
        value = metrics.get(o.key, math.nan)
        if not math.isfinite(value):
            raise TrialFailed(f"objective {o.key} is {value} (not a finite number)")
        return float(value)

    def _train_and_score(self, arch: str, metrics: dict[str, float], info: dict[str, Any],
                         budget: float | None = None, digital: list[str] | None = None,
                         hardware: Hardware | None = None) -> dict[str, Any]:
        data, fit_cfg = budgeted(self.cfg, self.data, budget)
        info["seeds"] = TrialSeeds(self.cfg.seed).as_dict()
        with torch_threads(self.cfg.train.threads):
            if self.cfg.evaluator == "supernet":  # inherited weights instead of proxy training
                model = inherited_model(self.cfg, data, arch, metrics, info)
                steps = self.cfg.supernet.finetune_steps if budget is None else int(budget)
                if steps > 0:
                    result = fit(model, data, glue.fit_config(self.cfg, steps=steps))
                    metrics.update(train_loss=result.train_loss, train_seconds=result.seconds)
                    info["finetune_steps"] = steps
            elif continues(self.cfg, budget):
                assert budget is not None
                model = self.build(arch)
                self._fit_rung(arch, model, data, fit_cfg, budget, metrics, info)
            else:
                model = self.build(arch)
                result = fit(model, data, fit_cfg)
                # train_loss_sum: the training-speed estimate (Ru et al., NeurIPS 2021), the sum
                # of the epochs' mean losses, free from the run itself: lower trains faster.
                metrics.update(train_loss=result.train_loss, train_seconds=result.seconds,
                               train_images_per_s=result.images_per_s,
                               train_loss_sum=sum(h["train_loss"] for h in result.history))
                info["train_epochs"] = result.epochs
            x, y = self._eval_split()
            acc = evaluate(model, x, y, device=self.cfg.train.device)["acc"]
            metrics.update(acc_digital=acc, acc_digital_se=sampling_se(acc, len(y)),
                           acc_digital_images=float(len(y)))
            precision = rung_precision(self.cfg, budget)
            for hw, times in self.hw_times().items():
                if hw != "digital":
                    metrics.update(glue.hw_accuracy(self.cfg, model, self.data, hw, times, x, y,
                                                    digital=digital, precision=precision,
                                                    hardware=hardware))
        return {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}

    def _fit_rung(self, arch: str, model: nn.Module, data: DataSplits, fit_cfg: FitConfig,
                  budget: float, metrics: dict[str, float], info: dict[str, Any]) -> None:
        """Train to the rung of ``budget``, continuing from the rung below when its state is
        saved; the state at this rung's end is saved unless it is the top rung."""
        budgets, seed = rung_budgets(self.cfg.schedule), self.cfg.seed
        rung = budgets.index(budget)
        below = self.rungs.load(arch, seed, rung - 1) if self.rungs and rung > 0 else None
        result, state = fit_rung(model, data, fit_cfg, epochs=budget, top_epochs=budgets[-1],
                                 state=below)
        if self.rungs is not None and rung < len(budgets) - 1:
            self.rungs.save(arch, seed, rung, state)
        metrics.update(train_loss=result.train_loss, train_seconds=result.seconds,
                       train_images_per_s=result.images_per_s,
                       train_loss_sum=sum(h["train_loss"] for h in result.history))
        info.update(train_epochs=result.epochs, train_steps=result.steps,
                    resumed_from_step=result.resumed_from)

    def build(self, arch: str) -> nn.Module:
        """The candidate, initialised from the trial seed's ``init`` stream: the global RNG is
        forked, so a cost-cache miss or an earlier trial cannot change the weights."""
        data = self.data
        with torch.random.fork_rng():
            torch.manual_seed(TrialSeeds(self.cfg.seed).init)
            return self.space.build_for(arch, data)

    def _eval_split(self):  # noqa: ANN202 - (x, y) tensors
        limit = self.cfg.hw_eval.eval_limit
        return self.data.x_val[:limit], self.data.y_val[:limit]


def continues(cfg: StudyConfig, budget: float | None) -> bool:
    """Whether a rung of ``budget`` trains on the top rung's schedule and continues the rung
    below (``nas.scoring.continuation``): proxy training with an epochs budget. A budget of
    training images trains another data set at each rung, so it starts afresh."""
    return (budget is not None and cfg.evaluator == "train" and cfg.schedule.type != "none"
            and cfg.schedule.resource == "epochs")


def budgeted(cfg: StudyConfig, data: DataSplits, budget: float | None
             ) -> tuple[DataSplits, FitConfig]:
    """(data, FitConfig) of a proxy training at a rung's ``budget``: epochs, or the first
    training images; ``None`` is the study's full budget."""
    if budget is None or cfg.schedule.resource == "steps":  # steps: a supernet's fine-tuning
        return data, glue.fit_config(cfg)
    if cfg.schedule.resource == "images":
        n = max(1, int(budget))
        return dataclasses.replace(data, x_train=data.x_train[:n],
                                   y_train=data.y_train[:n]), glue.fit_config(cfg)
    return data, glue.fit_config(cfg, epochs=float(budget))
