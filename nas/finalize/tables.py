"""The before/after table of the model card: rows with every spread named, and its Markdown."""

from __future__ import annotations

from typing import Any

# Before/after rows of the model card: (key, label, unit).
TABLE = (("params", "parameters", "count"), ("macs", "MACs per image", "count"),
         ("latency_ms", "latency (median)", "ms"),
         ("acc_digital", "accuracy, digital (val)", "fraction"),
         ("test_acc_digital", "accuracy, digital (test)", "fraction"))


# Suffixes of an accuracy key that are statistics of it, not metrics of their own.
ESTIMATE = ("_std", "_se", "_median", "_repeats", "_images")



def before_after(before: dict[str, float], after: dict[str, float]) -> list[dict[str, Any]]:
    """The before/after rows: costs, every accuracy with its SE, and the images each rests on."""
    accs = ["acc_digital", "test_acc_digital"] + sorted(
        k for k in after if k.startswith("acc_") and k != "acc_digital"
        and not k.endswith(ESTIMATE))
    specs = [*TABLE[:3], *(_accuracy_spec(k) for k in accs)]
    specs += [(f"{k}_images", f"images scored, {_accuracy_spec(k)[1][10:]}", "count")
              for k in accs]
    rows = []
    for k, label, unit in specs:
        if k in before and k in after:
            rows.append({"key": k, "label": label, "unit": unit, "before": before[k],
                         "after": after[k], "ratio": after[k] / before[k] if before[k] else None,
                         **_estimate(k, before, "before"), **_estimate(k, after, "after"),
                         **_spread(k, before, after)})
    return rows


def _accuracy_spec(key: str) -> tuple[str, str, str]:
    """``acc_pcm@1d`` -> its row: ``accuracy, pcm@1d (val)``, a fraction."""
    known = {k: (k, label, unit) for k, label, unit in TABLE}
    return known.get(key, (key, f"accuracy, {key.removeprefix('acc_')} (val)", "fraction"))


def _estimate(key: str, figures: dict[str, float], side: str) -> dict[str, Any]:
    """An accuracy's SE, the std over programmings, and what the SE rests on (programmings for
    analog hardware, images always), as the study stores them (``<key>_se`` ...)."""
    if f"{key}_se" not in figures:
        return {}
    return {f"{name}_{side}": figures.get(f"{key}_{suffix}") for name, suffix in (
        ("se", "se"), ("std", "std"), ("n", "repeats"), ("images", "images"))}


def _spread(key: str, before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
    """p10-p90 of a timed figure, and the ratio's own p10-p90 from the interleaved rounds."""
    if key != "latency_ms":
        return {}
    return {"p10_before": before.get("latency_p10_ms"), "p90_before": before.get("latency_p90_ms"),
            "p10_after": after.get("latency_p10_ms"), "p90_after": after.get("latency_p90_ms"),
            "ratio_p10": after.get("latency_ratio_p10"),
            "ratio_p90": after.get("latency_ratio_p90")}


def cell(r: dict[str, Any], side: str) -> str:
    """A figure with its spread named: ``± SE`` with what it rests on (programmings for analog
    accuracies, images for digital ones), ``[p10-p90]`` of timed calls; counts as integers."""
    v, se = r[side], r.get(f"se_{side}")
    text = (f"{v:,.0f}" if r.get("unit") == "count" else f"{v:.4g}") if isinstance(
        v, float) else str(v)
    if isinstance(se, float):
        n, images = r.get(f"n_{side}"), r.get(f"images_{side}")
        rests = f"{n:.0f} programmings" if n else f"{images:.0f} images"
        return f"{text} ± {se:.2g} (SE, {rests})"
    lo, hi = r.get(f"p10_{side}"), r.get(f"p90_{side}")
    return f"{text} [{lo:.4g}-{hi:.4g}]" if lo is not None and hi is not None else text


def ratio_cell(r: dict[str, Any]) -> str:
    if r["ratio"] is None:
        return ""
    lo, hi = r.get("ratio_p10"), r.get("ratio_p90")
    return f"x{r['ratio']:.3f}" + (f" [{lo:.3f}-{hi:.3f}]" if lo is not None else "")



LEGEND = ("Latency: before and after timed interleaved in one run; [p10-p90] of the calls, the "
          "ratio's [p10-p90] over the interleaved rounds. Accuracy: mean ± SE, the standard error "
          "as the Pareto tables give it: over the programmings for analog hardware (image "
          "sampling included), binomial over the images for digital; the std over programmings "
          "is in summary.json. Counts are counts.")



def table_markdown(rows: list[dict[str, Any]], notes: list[str] = ()) -> str:
    lines = ["## Before / after finalize", "", "| metric | unit | before | after | after/before |",
             "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['label']} | {r['unit']} | {cell(r, 'before')} | {cell(r, 'after')} | "
                     f"{ratio_cell(r)} |")
    lines += ["", LEGEND]
    lines += [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"

