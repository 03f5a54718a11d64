"""Files of a drift experiment: CSV (one row per curve and time), PNG plot, JSON with provenance."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

from analog.defaults import scoring_label
from analog.experiment import ExperimentResult

CSV_FIELDS = ("curve", "hw", "hwa", "compensation", "path", "adabs", "images", "t", "t_s",
              "acc_mean", "acc_std", "acc_se", "repeats", "weight_fraction", "mac_fraction")
REF_STYLES = (":", (0, (6, 2)), "-.", (0, (1, 3)), (0, (8, 2, 1, 2)))


def csv_rows(result: ExperimentResult) -> list[dict[str, Any]]:
    rows = []
    for name, ref in result.references.items():
        point = ref.points[0]
        rows.append({"curve": name, "hw": name, "hwa": False, "compensation": "", "path": ref.path,
                     "t": "any", "t_s": "", "acc_mean": point.acc_mean, "acc_std": 0.0,
                     "repeats": 1, "weight_fraction": 0.0, "mac_fraction": 0.0})
    for curve in result.curves:
        for row in curve.result.rows():
            n = row["repeats"]
            se = row["acc_std"] / math.sqrt(n) if n > 1 else 0.0
            rows.append({"curve": curve.label, "hwa": curve.hwa, "acc_se": se, **row})
    return rows


def write_csv(result: ExperimentResult, path: Path) -> None:
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=CSV_FIELDS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(csv_rows(result))


def plot(result: ExperimentResult, path: Path, title: str) -> None:
    """Accuracy vs. drift time (symmetric-log x so t=0 fits): mean +- 1 std bands over the
    programmings (the legend says how many), references as distinct horizontal lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for curve in result.curves:
        res = curve.result
        mean = [100 * m for m in res.acc_mean]
        std = [100 * s for s in res.acc_std]
        line, = ax.plot(res.times, mean, marker="o", linestyle="--" if not res.compensation
                        else "-", label=f"{curve.label}: mean, band +-1 std "
                                        f"({scoring_label(res)})")
        low = [m - s for m, s in zip(mean, std, strict=True)]
        high = [m + s for m, s in zip(mean, std, strict=True)]
        ax.fill_between(res.times, low, high, color=line.get_color(), alpha=0.2)
    _references(ax, result)
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
    ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _references(ax, result: ExperimentResult) -> None:
    """Horizontal lines; each has its own dash pattern and width, and a line that coincides
    with an earlier one says so in the legend, so equal references stay distinguishable."""
    seen: dict[str, float] = {}
    for i, (name, ref) in enumerate(result.references.items()):
        acc = 100 * ref.acc_mean[0]
        same = [n for n, a in seen.items() if abs(a - acc) < 0.005]
        label = f"{name}: {acc:.2f}%" + (f" (same as {', '.join(same)})" if same else "")
        ax.axhline(acc, color=f"C{7 + i % 3}", linestyle=REF_STYLES[i % len(REF_STYLES)],
                   linewidth=1.0 + 0.8 * len(same), label=label)
        seen[name] = acc


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
    if result.sweep:
        from analog import sweep

        paths["sweep_csv"] = out_dir / "analog_sweep.csv"
        paths["sweep_png"] = out_dir / "analog_sweep.png"
        sweep.write_csv(result.sweep, paths["sweep_csv"], result.config.options)
        sweep.plot(result.sweep, paths["sweep_png"], title)
    payload = {**meta, **result.as_dict()}
    paths["json"].write_text(json.dumps(_clean(payload), indent=1, default=str))
    return paths
