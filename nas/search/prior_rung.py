"""Rung 0 of successive halving scored for free: a prior in place of training (``schedule.prior``).

A parameter count ranks the Fashion-MNIST resnet truth at Kendall tau 0.84, and SynFlow at
initialisation (0.15 s) at 0.86, against 0.82-0.84 for one run of the 20-second training
recipe (BENCHMARKS.md, fidelity). So a study can look at ``eta`` times more candidates than it
trains: every new candidate gets a rung-0 trial that measures its costs (latency, cached by
arch) and scores it without training, and the usual promotion rule (non-dominated rank on
(prior, costs), then crowding) sends its best share to the first trained rung.

A rung-0 trial is a COMPLETE trial of its own with ``rung`` 0, ``budget`` 0 and ``prior`` (the
prior's name; ``info.rung`` reads ``rung 0 (prior)``). Its values are the study's objectives with
every trained objective (accuracy) replaced by the prior, negated where that objective is
minimized, and every cost objective as measured. Those values are on another scale than an
accuracy, so a rung-0 trial never enters the front (``front_pool``) and the sampler never learns
from one (``latest_rungs``): it learns from trained rungs only.
"""

from __future__ import annotations

import math
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from hwnas.common.threads import torch_threads
from nas.scoring import glue
from nas.scoring.evaluate import Evaluator, TrialFailed
from nas.scoring.zero_cost import prior_images, prior_score
from nas.search.sampling import sample_candidate
from nas.study import store
from nas.study.config import StudyConfig
from nas.study.mapping import digital_patterns, fixed_choice

LABEL = "rung 0 (prior)"


class PriorRung:
    """Scores a trial's candidate at rung 0: its costs and ``cfg.schedule.prior``, no training.

    It uses the study's ``Evaluator`` (the driver's, so the data set is loaded once; one of its
    own, built on first use, when none is given) for the space, the data's shapes and the seeded
    initialisation a trained rung starts from."""

    def __init__(self, cfg: StudyConfig, evaluator: Evaluator | None = None):
        self.cfg, self.name = cfg, cfg.schedule.prior
        self._evaluator = evaluator

    @property
    def evaluator(self) -> Evaluator:
        if self._evaluator is None:
            self._evaluator = Evaluator(self.cfg)
            self._evaluator.prepare()
        return self._evaluator

    def score(self, arch: str) -> tuple[dict[str, float], dict[str, float]]:
        """(metrics, constraints) of ``arch`` at rung 0: its cost metrics, ``prior_score``
        and the violations of the study's cost budgets (accuracy budgets wait for training)."""
        ev = self.evaluator
        ev.space.validate(arch)
        metrics, _ = glue.costs(self.cfg, ev.space.name, arch, ev.data.input_shape,
                                ev.data.num_classes)
        model = ev.build(arch)  # the seeded initialisation a trained rung starts from
        mcfg = self.cfg.hw_eval.mapping_cfg
        if mcfg.active:  # a fixed mapping changes the analog cost metrics (never searched here)
            digital = digital_patterns(model, fixed_choice(mcfg), mcfg)
            metrics.update(glue.mapped_costs(self.cfg, model, ev.data.input_shape, digital))
        with torch_threads(self.cfg.train.threads):
            value = prior_score(self.name, model, prior_images(ev.data.x_train, self.cfg.seed))
        if not math.isfinite(value):
            raise TrialFailed(f"prior {self.name} of {arch} is {value}: "
                              + ("its kernel counts nn.ReLU codes and the model has none; use "
                                 "prior synflow or params" if self.name == "naswot" else
                                 "not a finite number"))
        metrics["prior_score"] = value
        constraints = {b.key: b.violation(metrics[b.key]) for b in ev.budgets if b.early}
        return metrics, constraints

    def values(self, metrics: dict[str, float]) -> tuple[float, ...]:
        """The trial's values: the prior for each trained objective, the measured costs."""
        out = []
        for o in self.evaluator.objectives:
            if o.metric.stage == "train":
                out.append(metrics["prior_score"] if o.direction == "maximize"
                           else -metrics["prior_score"])
            elif o.key in metrics:
                out.append(metrics[o.key])
            else:
                raise TrialFailed(f"objective {o.key} was not measured at rung 0")
        return tuple(out)

    def __call__(self, trial: optuna.Trial) -> tuple[float, ...]:
        """The rung-0 objective: sample the candidate as the driver does, score it, record it."""
        trial.set_user_attr(store.PROCESS, store.process_attr())
        if store.surplus(trial, self.cfg.n_trials):
            why = f"surplus: n_trials={self.cfg.n_trials} were complete or running"
            trial.set_user_attr("fail_reason", why)
            raise optuna.TrialPruned(why)
        arch, _ = sample_candidate(trial, self.evaluator.space, self.cfg.hw_eval.mapping_cfg)
        trial.set_user_attr("arch", arch)
        trial.set_user_attr("prior", self.name)
        try:
            metrics, constraints = self.score(arch)
            values = self.values(metrics)
        except Exception as err:
            trial.set_user_attr("fail_reason", f"{type(err).__name__}: {err}"[:4000])
            raise
        for key, value in constraints.items():
            trial.set_constraint(key, value)
        for key, value in metrics.items():
            trial.set_user_attr(key, value)
        trial.set_user_attr("feasible", all(v <= 0 for v in constraints.values()))
        trial.set_user_attr("info", {"rung": LABEL, "prior": self.name})
        return values


def is_prior(trial: Any) -> bool:
    """Whether ``trial`` (a FrozenTrial) is a rung-0 prior result."""
    return "prior" in trial.user_attrs


def prior_looks(study: optuna.Study) -> dict[str, FrozenTrial]:
    """Each arch's complete rung-0 look that holds its prior score (``prior_score``), by arch."""
    return {t.user_attrs.get("arch"): t for t in study.get_trials(
        deepcopy=False, states=(TrialState.COMPLETE,))
        if is_prior(t) and t.values is not None and t.user_attrs.get("prior_score") is not None}

