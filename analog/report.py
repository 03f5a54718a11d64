"""Files of a drift experiment: CSV (one row per curve and time), PNG plot, JSON with provenance."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

from analog.experiment import ExperimentResult

CSV_FIELDS = ("curve", "hw", "hwa", "compensation", "path", "t", "t_s", "acc_mean", "acc_std",
              "repeats", "weight_fraction", "mac_fraction")


def csv_rows(result: ExperimentResult) -> list[dict[str, Any]]:
    rows = []
    for name, ref in result.references.items():
        point = ref.points[0]
        rows.append({"curve": name, "hw": name, "hwa": False, "compensation": "", "path": ref.path,
                     "t": "any", "t_s": "", "acc_mean": point.acc_mean, "acc_std": 0.0,
                     "repeats": 1, "weight_fraction": 0.0, "mac_fraction": 0.0})
    for curve in result.curves:
        for row in curve.result.rows():
            rows.append({"curve": curve.label, "hwa": curve.hwa, **row})
    return rows


def write_csv(result: ExperimentResult, path: Path) -> None:
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=CSV_FIELDS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(csv_rows(result))


def plot(result: ExperimentResult, path: Path, title: str) -> None:
    """Accuracy vs. drift time (symmetric-log x so t=0 fits), mean +- std bands, references."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for curve in result.curves:
        res = curve.result
        mean = [100 * m for m in res.acc_mean]
        std = [100 * s for s in res.acc_std]
        line, = ax.plot(res.times, mean, marker="o", linestyle="--" if not res.compensation
                        else "-", label=f"{curve.label} ({res.repeats} repeats)")
        low = [m - s for m, s in zip(mean, std, strict=True)]
        high = [m + s for m, s in zip(mean, std, strict=True)]
        ax.fill_between(res.times, low, high, color=line.get_color(), alpha=0.2)
    for i, (name, ref) in enumerate(result.references.items()):
        acc = 100 * ref.acc_mean[0]
        ax.axhline(acc, color=f"C{7 + i % 3}", linestyle=":", linewidth=1.2,
                   label=f"{name}: {acc:.2f}%")
    times = result.curves[0].result.times if result.curves else [1.0]
    ax.set_xscale("symlog", linthresh=1.0)
    ax.set_xlim(left=0.0 if min(times) == 0 else min(times) / 2, right=max(times) * 2)
    ax.set_xticks(times)
    ax.set_xticklabels([p.label for p in result.curves[0].result.points] if result.curves
                       else ["1s"])
    ax.set_xlabel("time after programming (log scale)")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _clean(value: Any) -> Any:
    """JSON has no NaN: write null instead."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def write_all(result: ExperimentResult, out_dir: Path, *, title: str,
              meta: dict[str, Any]) -> dict[str, Path]:
    """``analog_eval.{csv,png,json}`` in ``out_dir``; ``meta`` (model, data, provenance...) goes
    into the JSON next to the resolved config and every repeat's accuracy."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {ext: out_dir / f"analog_eval.{ext}" for ext in ("csv", "png", "json")}
    write_csv(result, paths["csv"])
    plot(result, paths["png"], title)
    payload = {**meta, **result.as_dict()}
    paths["json"].write_text(json.dumps(_clean(payload), indent=1, default=str))
    return paths
