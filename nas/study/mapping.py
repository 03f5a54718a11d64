"""Layer-wise analog/digital mapping of a candidate, fixed or searched (``hw_eval.mapping``).

Which layers run on analog tiles is a design choice: keeping the first and last layers digital
often buys accuracy for little energy. In a study::

    hw_eval:
      mapping:
        search: [first_k_digital, last_k_digital]  # the sampler picks each in 0..max_k
        max_k: 2
        digital_layers: ["head.*"]                  # optional fixed patterns on top

or a fixed assignment: ``mapping: {first_k_digital: 1, last_k_digital: 1}``. The first and last
``k`` are counted over the analog-mappable layers in module order (``analog.coverage``), so the
same knob means the same thing in every architecture of a space. Every driver samples a trial's
candidate through ``nas.search.sampling.sample_candidate`` (the choice is a trial parameter,
stored with it); the evaluator passes ``digital_patterns(model, choice)`` to
``analog.evaluate(..., digital=)`` and ``hw_cost.analog_cost(..., digital=)``, so accuracy,
coverage and cost see one assignment.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from analog.coverage import mappable_layers
from hwnas.common.errors import ConfigError, Problem
from nas.study.hardware import HardwareSpace

if TYPE_CHECKING:  # annotations only: the config module imports this one
    from nas.study.config import StudyConfig

KNOBS = ("first_k_digital", "last_k_digital")


@dataclass(frozen=True)
class MappingCfg:
    search: tuple[str, ...] = ()
    """Knobs the sampler varies (each in 0..``max_k``)."""
    max_k: int = 2
    first_k_digital: int = 0
    last_k_digital: int = 0
    digital_layers: tuple[str, ...] = ()
    """Fixed shell patterns of layers kept digital in every candidate."""
    hardware: HardwareSpace = HardwareSpace({})
    """Hardware dimensions sampled with the arch (``nas.study.hardware``)."""

    @property
    def searched(self) -> bool:
        return bool(self.search)

    @property
    def active(self) -> bool:
        """Whether any layer can be kept digital (else every mappable layer is analog), or
        the hardware is declared (its costs are then taken per candidate, as a mapping's)."""
        return bool(self.search or self.first_k_digital or self.last_k_digital
                    or self.digital_layers or self.hardware.active)


def parse_mapping(raw: dict[str, Any] | None) -> MappingCfg:
    """``hw_eval.mapping`` -> ``MappingCfg``; every problem at once."""
    raw = dict(raw or {})
    allowed = ("search", "max_k", *KNOBS, "digital_layers")
    problems = [Problem("hw_eval.mapping", f"keys must be among {list(allowed)}", key,
                        "drop or rename it") for key in raw if key not in allowed]
    search = raw.get("search") or []
    search = [search] if isinstance(search, str) else list(search)
    problems += [Problem("hw_eval.mapping.search", f"entries must be among {list(KNOBS)}", knob,
                         "e.g. search: [first_k_digital, last_k_digital]")
                 for knob in search if knob not in KNOBS]
    for key in ("max_k", *KNOBS):
        value = raw.get(key, 0)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            problems.append(Problem(f"hw_eval.mapping.{key}", "must be an integer >= 0", value,
                                    "e.g. 1 (one layer)"))
    if problems:
        raise ConfigError(problems)
    patterns = raw.get("digital_layers") or []
    return MappingCfg(search=tuple(search), max_k=raw.get("max_k", 2),
                      first_k_digital=raw.get("first_k_digital", 0),
                      last_k_digital=raw.get("last_k_digital", 0),
                      digital_layers=tuple([patterns] if isinstance(patterns, str) else patterns))


def mapping_problems(study: StudyConfig) -> list[Problem]:
    """Study-level rules of ``hw_eval.mapping`` (``study``: a ``nas.study.config.StudyConfig``)."""
    cfg, problems = study.hw_eval.mapping_cfg, []
    if cfg.active and study.tabular:
        problems.append(Problem("hw_eval.mapping", "needs trained candidates: a tabular study "
                                "looks its scores up", study.hw_eval.mapping,
                                "drop hw_eval.mapping, or score trained candidates"))
    if cfg.searched and study.schedule.type != "none":
        problems.append(Problem("hw_eval.mapping.search", "cannot be combined with successive "
                                "halving, whose rungs are kept per arch", list(cfg.search),
                                "fix the mapping (first_k_digital: 1) or set schedule.type: none"))
    return problems


def fixed_choice(cfg: MappingCfg) -> dict[str, int]:
    """The configured mapping of a study that does not search it."""
    if cfg.searched:
        raise ConfigError.one("mapping", "a searched mapping is chosen per trial", None,
                              "pass the trial's choice: evaluate(arch, mapping=choose(trial, "
                              "cfg))")
    return {knob: getattr(cfg, knob) for knob in KNOBS}




def describe(choice: dict[str, Any], patterns: list[str]) -> str:
    """One line for the trial's info: the knobs and the layers kept digital."""
    knobs = ", ".join(f"{k}={v}" for k, v in choice.items() if k in KNOBS)
    return f"{knobs}; digital: {', '.join(patterns) or 'none'}"


def digital_patterns(model: Any, choice: dict[str, Any],
                     cfg: MappingCfg | None = None) -> list[str]:
    """Layer names (valid shell patterns) to keep digital for ``choice``, plus fixed patterns."""
    names = mappable_layers(model)
    first, last = choice.get("first_k_digital", 0), choice.get("last_k_digital", 0)
    chosen = names[:first] + (names[len(names) - last:] if last else [])
    fixed = list(cfg.digital_layers) if cfg else []
    return list(dict.fromkeys(chosen + fixed))
