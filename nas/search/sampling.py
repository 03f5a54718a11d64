"""The sampling funnel of every driver: a trial's candidate is its arch, then its layer-wise
mapping (``hw_eval.mapping``, ``nas.study.mapping``), drawn in this one order so that the Optuna
driver, the Ray searcher, the rung-0 prior and the replay of stored parameters agree."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nas.study.hardware import choose_hardware
from nas.study.mapping import KNOBS, MappingCfg

if TYPE_CHECKING:
    from search_spaces import SearchSpace


def choose(trial: Any, cfg: MappingCfg) -> dict[str, int]:
    """The trial's mapping: searched knobs from ``trial.suggest_int("mapping.<knob>", 0,
    max_k)`` (an Optuna trial, or anything with that method), the others as configured."""
    return {knob: trial.suggest_int(f"mapping.{knob}", 0, cfg.max_k) if knob in cfg.search
            else getattr(cfg, knob) for knob in KNOBS}


def sample_candidate(trial: Any, space: SearchSpace,
                     cfg: MappingCfg) -> tuple[str, dict[str, Any]]:
    """A trial's candidate: the arch (``space.sample``), then its mapping (``choose``), then its
    hardware (``nas.study.hardware.choose_hardware``: ``hw.<dim>`` keys, whose ``digital``
    sets the mapping's knobs). Every driver and the replay of stored parameters sample through
    here, in this one order."""
    arch, choice = space.sample(trial), dict(choose(trial, cfg))
    hw = choose_hardware(trial, cfg.hardware)
    if hw is not None:
        if "digital" in cfg.hardware.dims:
            choice.update(hw.mapping())
        choice.update({f"hw.{k}": v for k, v in vars(hw).items()})
    return arch, choice
