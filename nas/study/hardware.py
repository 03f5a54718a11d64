"""Hardware choices searched with the architecture (``hw_eval.hardware``).

ADC and DAC bits, tile size, read mode, drift compensation, which layers stay digital and the
device model are invisible to every free proxy (SynFlow, parameters), yet they move analog
accuracy and energy. A study declares the values to search beside the architecture::

    hw_eval:
      hardware:
        device: [pcm_static, pcm_hermes]   # analog hardware models (`hwnas analog list`)
        adc_bits: [6, 8]
        dac_bits: [6, 8]
        tile_size: [256, 512]
        read_mode: [one_phase, four_phase]
        compensation: [true, false]
        digital: [none, first_last]        # none | first | last | first_last

A single value fixes a dimension; a list is searched (``trial.suggest_categorical("hw.<dim>",
...)``, sampled after the arch by ``nas.search.sampling.sample_candidate``). The sampled values
become one ``Hardware``: its ``options`` reach the accuracy model (``analog.evaluate(options=)``)
and its ``figures`` the energy estimate (``hw_cost.analog_cost(figures=, hw_options=)``), so
both describe one chip. ``Hardware.code`` is the choice as one short string, e.g.
``pcm_static:a8-d8-t256-4p-gdc-dfl``, stored with the candidate like its arch string.

**Read mode.** HERMES's one-phase read (9.76 TOPS/W) is its low-precision mode, four-phase
(2.48 TOPS/W) its high-precision one (Le Gallo et al., Nat. Electron. 2023, Ext. Data Fig. 4).
The accuracy model simulates one signed MVM at full input precision, so a four-phase read is
scored as configured and a one-phase read with ``ONE_PHASE_DAC_LOSS`` bit fewer input
resolution. The size of that loss is an assumption (the paper reports the mode as lower
precision, not an equivalent bit count): a study that searches the read mode trades energy
against this stated penalty, never against none.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import analog
from hw_cost.analog_cost import AnalogFigures
from hwnas.common.errors import ConfigError, Problem

if TYPE_CHECKING:  # annotations only: the config module imports this one
    from nas.study.config import StudyConfig

READ_MODES = {"one_phase": "1p", "four_phase": "4p"}
DIGITAL = {"none": (0, 0), "first": (1, 0), "last": (0, 1), "first_last": (1, 1)}
DIGITAL_CODES = {"none": "none", "first": "f", "last": "l", "first_last": "fl"}
ONE_PHASE_DAC_LOSS = 1
"""Input bits a one-phase read loses in the accuracy model (an assumption, see above)."""
DIMS = ("device", "adc_bits", "dac_bits", "tile_size", "read_mode", "compensation", "digital")


@dataclass(frozen=True)
class HardwareSpace:
    """The values each hardware dimension may take (one value: fixed)."""

    dims: dict[str, tuple[Any, ...]]

    @property
    def active(self) -> bool:
        return bool(self.dims)

    @property
    def searched(self) -> tuple[str, ...]:
        return tuple(d for d in DIMS if len(self.dims.get(d, ())) > 1)


@dataclass(frozen=True)
class Hardware:
    """One sampled chip: the single description both the accuracy and the energy model use."""

    device: str | None = None
    adc_bits: int | None = None
    dac_bits: int | None = None
    tile_size: int | None = None
    read_mode: str = "four_phase"
    compensation: bool | None = None
    digital: str = "none"

    def scored_hw(self, objective_hw: str) -> str:
        """The hardware model scored in place of an objective's (``device``, else its own)."""
        return self.device or objective_hw

    def options(self, hw: str | None = None) -> dict[str, Any]:
        """``analog.aimc.AnalogOptions`` overrides for the accuracy model (read mode applied): a
        one-phase read loses ``ONE_PHASE_DAC_LOSS`` input bits, of ``dac_bits``, else of the
        scored model's own (``scored_hw(hw)``)."""
        dac = self.dac_bits
        if self.read_mode == "one_phase":
            name = self.scored_hw(hw) if hw or self.device else None
            base = dac if dac is not None else (dac_bits_of(name) if name else None)
            dac = max(base - ONE_PHASE_DAC_LOSS, 2) if base is not None else None
        raw = {"adc_bits": self.adc_bits, "dac_bits": dac, "tile_size": self.tile_size,
               "compensation": self.compensation}
        return {k: v for k, v in raw.items() if v is not None}

    def cost_options(self) -> dict[str, Any]:
        """The overrides the energy estimate reads (tile size, ADC bits, as configured)."""
        raw = {"adc_bits": self.adc_bits, "tile_size": self.tile_size}
        return {k: v for k, v in raw.items() if v is not None}

    def figures(self) -> AnalogFigures:
        """The energy model's figures with this chip's read mode."""
        return AnalogFigures(read_mode=self.read_mode)

    def mapping(self) -> dict[str, int]:
        first, last = DIGITAL[self.digital]
        return {"first_k_digital": first, "last_k_digital": last}

    @property
    def code(self) -> str:
        """One short string, e.g. ``pcm_static:a8-d8-t256-4p-gdc-dfl`` (``-`` for unset)."""
        def part(prefix: str, value: Any) -> str:
            return f"{prefix}{'-' if value is None else value}"
        gdc = {None: "gdc?", True: "gdc", False: "nodc"}[self.compensation]
        return (f"{self.device or '-'}:" + "-".join((
            part("a", self.adc_bits), part("d", self.dac_bits), part("t", self.tile_size),
            READ_MODES[self.read_mode], gdc, "d" + DIGITAL_CODES[self.digital])))


def parse_hardware(raw: dict[str, Any] | None) -> HardwareSpace:
    """``hw_eval.hardware`` -> ``HardwareSpace``; every problem at once."""
    raw, problems, dims = dict(raw or {}), [], {}
    for key, value in raw.items():
        where = f"hw_eval.hardware.{key}"
        if key not in DIMS:
            problems.append(Problem("hw_eval.hardware", f"keys must be among {list(DIMS)}", key,
                                    "drop or rename it"))
            continue
        values = tuple(value) if isinstance(value, list | tuple) else (value,)
        if not values:
            problems.append(Problem(where, "must name at least one value", value,
                                    "give one value (fixed) or a list (searched)"))
        bad = [v for v in values if _bad(key, v)]
        problems += [Problem(where, _RULES[key][0], v, _RULES[key][1]) for v in bad]
        dims[key] = values
    if problems:
        raise ConfigError(problems)
    return HardwareSpace(dims)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


_CHECKS = {
    "device": lambda v: isinstance(v, str) and v in analog.list_hw()
    and analog.get_hw(v).kind == "analog",
    "adc_bits": lambda v: _is_int(v) and 2 <= v <= 16,
    "dac_bits": lambda v: _is_int(v) and 2 + ONE_PHASE_DAC_LOSS <= v <= 16,
    "tile_size": lambda v: _is_int(v) and v >= 16,
    "read_mode": lambda v: v in READ_MODES,
    "compensation": lambda v: isinstance(v, bool),
    "digital": lambda v: v in DIGITAL,
}
_RULES = {
    "device": ("must be a registered analog hardware model", "see `hwnas analog list`, "
               "e.g. pcm_static"),
    "adc_bits": ("must be an integer in 2..16", "e.g. [6, 8]"),
    "dac_bits": (f"must be an integer in {2 + ONE_PHASE_DAC_LOSS}..16 (one-phase reads lose "
                 f"{ONE_PHASE_DAC_LOSS} bit)", "e.g. [6, 8]"),
    "tile_size": ("must be an integer >= 16", "e.g. [256, 512]"),
    "read_mode": (f"must be one of {list(READ_MODES)}", "e.g. [one_phase, four_phase]"),
    "compensation": ("must be true or false", "e.g. [true, false]"),
    "digital": (f"must be one of {list(DIGITAL)}", "e.g. [none, first_last]"),
}


def _bad(key: str, value: Any) -> bool:
    return not _CHECKS[key](value)


def hardware_problems(study: StudyConfig) -> list[Problem]:
    """Study-level rules (``study``: a ``nas.study.config.StudyConfig``)."""
    space, he = study.hw_eval.hardware_space, study.hw_eval
    if not space.active:
        return []
    out = []
    analog_objs = [o for o in [*study.objectives, *study.constraints]
                   if o.hw and o.hw in analog.list_hw() and analog.get_hw(o.hw).kind == "analog"]
    if not analog_objs:
        out.append(Problem("hw_eval.hardware", "needs an analog accuracy objective or budget "
                           "to score the sampled hardware on", None,
                           "add e.g. {metric: accuracy, hw: pcm_static, time: 30d}"))
    if len({o.hw for o in analog_objs}) > 1:
        out.append(Problem("hw_eval.hardware", "scores one analog model per candidate; the "
                           "objectives name several", sorted({o.hw for o in analog_objs}),
                           "name one analog model in the objectives and constraints"))
    if "digital" in space.dims and he.mapping:
        out.append(Problem("hw_eval.hardware.digital", "and hw_eval.mapping both choose the "
                           "digital layers", he.mapping, "keep one of them"))
    if he.options and space.active:
        out.append(Problem("hw_eval.options", "are fixed by hw_eval.hardware in a hardware "
                           "study", sorted(he.options), "move them into hw_eval.hardware"))
    if space.searched and study.schedule.type != "none":
        out.append(Problem("hw_eval.hardware", "cannot be searched with successive halving, "
                           "whose rungs are kept per arch", list(space.searched),
                           "fix the hardware or set schedule.type: none"))
    out += _device_problems(space)
    return out


def _device_problems(space: HardwareSpace) -> list[Problem]:
    """Each device must build with the extreme values of every other dimension."""
    out = []
    for device in space.dims.get("device", ()):
        if _bad("device", device):
            continue
        for pick in (min, max):
            hw = Hardware(device=device, **{d: pick(v) for d, v in space.dims.items()
                                            if d in ("adc_bits", "dac_bits", "tile_size")})
            try:
                analog.get_hw(device).describe(**hw.options(device))
            except ConfigError as err:
                out += [Problem(f"hw_eval.hardware (device {device})", p.rule, p.value, p.fix)
                        for p in err.problems]
    return out


def dac_bits_of(hw: str) -> int | None:
    """The input (DAC) bits of analog hardware model ``hw`` as built: aihwkit's ``inp_res`` is
    a level count (> 1) or a resolution (1 / levels); levels are 2 ** bits - 2."""
    res = analog.get_hw(hw).describe().get("inp_res")
    if not isinstance(res, int | float) or res <= 0:
        return None
    levels = res if res > 1 else 1 / res
    return round(math.log2(levels + 2))


def choose_hardware(trial: Any, space: HardwareSpace) -> Hardware | None:
    """The trial's hardware: searched dims from ``trial.suggest_categorical("hw.<dim>", ...)``,
    the others fixed. None when the study declares no hardware."""
    if not space.active:
        return None
    values = {d: (trial.suggest_categorical(f"hw.{d}", list(v)) if len(v) > 1 else v[0])
              for d, v in space.dims.items()}
    return Hardware(**values)


def from_choice(choice: dict[str, Any] | None) -> Hardware | None:
    """The ``Hardware`` stored in a trial's choice dict (``hw.<dim>`` keys), else None."""
    values = {k.removeprefix("hw."): v for k, v in (choice or {}).items()
              if k.startswith("hw.")}
    return Hardware(**values) if values else None
