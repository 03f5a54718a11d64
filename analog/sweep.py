"""Parameter sweeps of an analog hardware model: accuracy vs. one periphery or device parameter.

``--sweep adc_bits=6,7,8,9 --sweep tile_size=128,256,512`` varies one parameter at a time (the
others stay at the hardware model's values, or at the fixed ``options``), evaluates every drift
time for each value, and writes one CSV and one plot (one panel per parameter, accuracy vs. the
swept value, one line per drift time, error bars = standard error over the programmings).
Parameters are the fields of ``analog.aimc.AnalogOptions``; each value is range-checked there.
Text options take words (``--sweep drift_comp=global,column,exact``); a converter's factors are
separated by ``/`` (``--sweep converter=single,dual:1/3``), as ``,`` separates the values.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from analog import defaults
from analog.aimc import AnalogOptions
from hwnas.common.errors import ConfigError, Problem

_INTS = ("dac_bits", "adc_bits", "tile_size")
_BOOLS = ("compensation",)
_TEXT = ("tile", "drift_comp", "converter", "noise_model")
SWEEPABLE = tuple(f.name for f in fields(AnalogOptions))


def _value(name: str, text: str) -> Any:
    if name in _INTS:
        return int(text)
    if name in _BOOLS:
        if text.lower() not in ("true", "false", "on", "off", "1", "0"):
            raise ValueError(text)
        return text.lower() in ("true", "on", "1")
    if name in _TEXT:
        return text
    return float(text)


def parse_sweeps(specs: Sequence[str], where: str = "--sweep") -> dict[str, list[Any]]:
    """``["adc_bits=6,7,8", ...]`` -> ``{"adc_bits": [6, 7, 8]}``; every problem at once."""
    out: dict[str, list[Any]] = {}
    problems: list[Problem] = []
    for spec in specs:
        name, _, values = spec.partition("=")
        name = name.strip()
        if name not in SWEEPABLE:
            problems.append(Problem(where, f"parameter must be one of {list(SWEEPABLE)}",
                                    name, f"e.g. {where} adc_bits=6,7,8,9"))
            continue
        try:
            parsed = [_value(name, v.strip()) for v in values.split(",") if v.strip()]
        except ValueError:
            problems.append(Problem(f"{where} {name}", "values must be a comma-separated list "
                                    f"of {'integers' if name in _INTS else 'numbers'}", values,
                                    f"e.g. {where} {name}=6,7,8"))
            continue
        if not parsed:
            problems.append(Problem(f"{where} {name}", "needs at least one value", spec,
                                    f"e.g. {where} {name}=6,7,8"))
        for value in parsed:
            problems += AnalogOptions(**{name: value}).problems(f"{where} {name}")
        out[name] = parsed
    if problems:
        raise ConfigError(problems)
    return out


@dataclass
class SweepPoint:
    param: str
    value: Any
    t: float
    label: str
    acc_mean: float
    acc_std: float
    repeats: int
    adabs: int = 0
    """AdaBS training images (0: off); with ``path`` and ``compensation``, how it was scored."""
    path: str = ""
    compensation: bool = True

    @property
    def acc_se(self) -> float:
        return self.acc_std / math.sqrt(self.repeats) if self.repeats > 1 else 0.0


def run_sweeps(evaluate: Callable[[dict[str, Any]], Any], sweeps: dict[str, list[Any]],
               log: Callable[[str], None] = print) -> list[SweepPoint]:
    """``evaluate(options)`` -> ``DriftResult`` for every swept value, one parameter at a time."""
    points = []
    for param, values in sweeps.items():
        for value in values:
            result = evaluate({param: value})
            log(f"sweep {param}={value}: " + "  ".join(
                f"{p.label} {100 * p.acc_mean:.2f}+-{100 * p.acc_std:.2f}"
                for p in result.points)
                + f"  [{defaults.scoring_label(result)}; {result.seconds:.1f} s]")
            points += [SweepPoint(param, value, p.t, p.label, p.acc_mean, p.acc_std,
                                  len(p.accs), result.adabs, result.path, result.compensation)
                       for p in result.points]
    return points


def write_csv(points: list[SweepPoint], path: Path, fixed: dict[str, Any]) -> None:
    cols = ("param", "value", "t", "t_s", "acc_mean", "acc_std", "acc_se", "repeats",
            "adabs_images", "path", "compensation", "fixed")
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(cols)
        for p in points:
            writer.writerow([p.param, p.value, p.label, p.t, p.acc_mean, p.acc_std, p.acc_se,
                             p.repeats, p.adabs, p.path, p.compensation,
                             ";".join(f"{k}={v}" for k, v in fixed.items())])


def plot(points: list[SweepPoint], path: Path, title: str) -> None:
    """One panel per swept parameter: accuracy vs. value, one line per drift time, +-1 SE."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    params = list(dict.fromkeys(p.param for p in points))
    width = max(7.5, 4.8 * len(params))
    fig, axes = plt.subplots(1, len(params), figsize=(width, 4.4), squeeze=False)
    for ax, param in zip(axes[0], params, strict=True):
        mine = [p for p in points if p.param == param]
        values = list(dict.fromkeys(p.value for p in mine))
        for i, label in enumerate(dict.fromkeys(p.label for p in mine)):
            line = [p for p in mine if p.label == label]
            ax.errorbar([values.index(p.value) for p in line], [100 * p.acc_mean for p in line],
                        yerr=[100 * p.acc_se for p in line], marker="os^vD<>"[i % 7],
                        capsize=3, label=f"t = {label}")
        ax.set_xticks(range(len(values)), [str(v) for v in values])
        ax.set_xlabel(param)
        ax.set_ylabel("test accuracy (%)")
        ax.grid(True, alpha=0.3)
        ax.set_title(f"{param} sweep (error bars: SE; {_settings(mine)})", fontsize=8)
        ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _settings(points: list[SweepPoint]) -> str:
    """How the points of one panel were scored, e.g. ``10 programmings, AdaBS 256 img, fast``."""
    def one(values: set) -> str:
        return "/".join(map(str, sorted(values)))

    adabs = {p.adabs for p in points}
    comp = {"on" if p.compensation else "off" for p in points}
    return (f"{one({p.repeats for p in points})} programmings, "
            f"AdaBS {'off' if adabs == {0} else one(adabs) + ' img'}, "
            f"{one({p.path for p in points})}, compensation {one(comp)}")
