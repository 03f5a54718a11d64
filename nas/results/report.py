"""``hwnas report runs/<study>``: a self-contained ``report.html`` plus the PNGs beside it.

Figures (matplotlib's object-oriented API: no global backend is set): the Pareto front of
hardware accuracy against the cost objective with each front model's digital accuracy beside it,
the hypervolume over trials with the front size, and (more than two objectives) every pair of
objectives. Then the front, the trial table and,
when ``hwnas finalize`` ran, its summary (``final/summary.json``).
"""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
from matplotlib.figure import Figure

from hwnas.common.provenance import provenance
from nas.results import summary
from nas.results.export import candidate_dirname
from nas.results.free_front import front_change
from nas.results.hv_change import hv_change
from nas.results.plots import hv_figure, pairs_figure, pareto_figure
from nas.results.run_settings import digital_below_note, overrides, settings_rows
from nas.results.trials_table import short_table
from nas.search.prior_rung import is_prior
from nas.search.schedule import front_pool
from nas.search.stop_share import STOPPED_BY_SHARE
from nas.study import store
from nas.study.config import StudyConfig
from nas.study.schedule import rung_budgets

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial


def _png(fig: Figure, path: Path) -> str:
    fig.savefig(path, dpi=120, bbox_inches="tight")
    return base64.b64encode(path.read_bytes()).decode()


def _img(b64: str, alt: str) -> str:
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{b64}">'


def _table(frame: pd.DataFrame, cls: str = "") -> str:
    table = frame.to_html(index=False, escape=True, na_rep="", classes=cls, float_format="%.4g")
    return f"<div class='wide'>{table}</div>"  # a wide table scrolls; the page does not


_ENERGY = (("analog_energy_uj", "energy analog uJ (estimate)"),
           ("digital_ref_energy_uj", "energy digital uJ (estimate)"))


def _front_frame(cfg: StudyConfig, front: summary.Front, study_dir: Path) -> pd.DataFrame:
    rows, lower = [], {t.number for t in front.lower}
    for t in [*front.trials, *front.lower]:  # lower: stopped at a lower rung, not on the front
        folder = study_dir / "pareto" / candidate_dirname(t.user_attrs)
        row = {"trial": t.number, "arch": t.user_attrs.get("arch")}
        if (t.user_attrs.get("info") or {}).get("hardware"):
            row["hardware"] = t.user_attrs["info"]["hardware"]
        if "rung" in t.user_attrs:
            row["rung"] = _rung_label(cfg, t, t.number in lower)
        row.update(dict(zip(front.keys, t.values, strict=True)))
        picked = (front.picked_on or {}).get(t.number)
        for j, key in enumerate(front.keys):  # every noisy score with its standard error
            if f"{key}_se" in t.user_attrs:
                row[f"{key} ±SE"] = t.user_attrs[f"{key}_se"]
                if picked is not None:  # what the front was picked on (pareto.shrink)
                    row[f"{key} shrunk"] = picked[j]
        if front.resolved is not None and t.number not in lower:
            row["resolved"] = "yes" if front.resolved[front.trials.index(t)] else "~ no"
        for key in ("acc_digital", "latency_p10_ms", "latency_p90_ms"):
            if key in t.user_attrs and key not in row:
                row[key] = t.user_attrs[key]
        for key, label in _ENERGY:  # analog and digital side by side, both estimates
            if key in t.user_attrs:
                row[label] = t.user_attrs[key]
        row["card"] = f"pareto/{folder.name}/card.md" if (folder / "card.md").exists() else ""
        rows.append(row)
    return pd.DataFrame(rows)


def _rung_label(cfg: StudyConfig, t: FrozenTrial, lower: bool) -> str:
    """A trial's rung and budget; a lower-rung one is marked as not on the front."""
    top = len(rung_budgets(cfg.schedule)) - 1 if cfg.schedule.type != "none" else "?"
    budget = t.user_attrs.get("budget")
    label = f"rung {int(t.user_attrs['rung'])} (top: {top})" + (
        f", {budget:g} {cfg.schedule.resource}" if budget is not None else "")
    return f"{label}: lower rung, not on the front" if lower else label


def _change_section(cfg: StudyConfig, study: optuna.Study, front: summary.Front) -> str:
    """What training changed against the free front of rung 0 (empty without a rung 0)."""
    change = front_change(cfg, study, front.trials)
    if change is None:
        return ""
    status = {**{a: "kept on the front" for a in change.kept},
              **{a: "dropped: dominated once trained" for a in change.dropped},
              **{a: "not trained" for a in change.untrained},
              **{a: "added: trained, off the free front" for a in change.added}}
    scored = {t.user_attrs.get("arch"): t for t in summary.completed(study) if not is_prior(t)}
    key = front.keys[0]
    rows = []
    for arch, what in status.items():
        t = scored.get(arch)
        rows.append({"arch": arch, "training": what,
                     key: t.values[0] if t is not None else None,
                     f"{key} ±SE": t.user_attrs.get(f"{key}_se") if t is not None else None})
    text = (f"{len(change.free)} candidates are on the free front of {change.n_looks} looks "
            f"({cfg.schedule.prior} against the costs, no training). Training kept "
            f"{len(change.kept)}, dropped {len(change.dropped)}, left {len(change.untrained)} "
            f"untrained (schedule.promote_max, schedule.stop_share or the run's limits) and "
            f"added {len(change.added)}; the front above holds trained candidates only.")
    stopped = [t.user_attrs[STOPPED_BY_SHARE] for t in study.get_trials(deepcopy=False)
               if STOPPED_BY_SHARE in t.user_attrs]
    if stopped:  # the first stop's reason: the share as training ended
        text += f" {stopped[0][0].upper()}{stopped[0][1:]} ({len(stopped)} not trained)."
    return (f"<h2>What training changed</h2><p>{html.escape(text)}</p>"
            + _hv_text(cfg, study, front, change.free) + _table(pd.DataFrame(rows)))


def _hv_text(cfg: StudyConfig, study: optuna.Study, front: summary.Front,
             free: list[str]) -> str:
    """The hypervolume of the trained front beside the free front's as predicted, with SEs."""
    pool, _ = front_pool(summary.completed(study))
    hv = hv_change(cfg, study, pool, free, front.reference)
    if hv is None:
        return ""
    text = (f"Hypervolume (the reference above): the {hv.n_trained} trained candidates "
            f"{hv.trained:.4g} ± {hv.trained_se:.2g}; the free front's {hv.n_free} members, "
            f"each at the accuracy the trained candidates' line on log {cfg.schedule.prior} "
            f"predicts for it, {hv.predicted:.4g} ± {hv.predicted_se:.2g} (SE: the SD over "
            f"{hv.draws} draws of every trained accuracy within its SE, the line refitted on "
            "each). Trained members are what the user gets; the predicted front is what the "
            "study would have promised without training the rest.")
    return f"<p>{html.escape(text)}</p>"


def _finalize_section(study_dir: Path) -> str:
    path = study_dir / "final" / "summary.json"
    if not path.is_file():
        return ""
    data = json.loads(path.read_text())
    items = data.get("models", data) if isinstance(data, dict) else data
    body = (_table(pd.json_normalize(items)) if isinstance(items, list) and items
            else f"<pre>{html.escape(json.dumps(data, indent=2))}</pre>")
    return f"<h2>Finalized models</h2>{body}"


def _header(cfg: StudyConfig, study: optuna.Study, front: summary.Front) -> str:
    states = pd.Series([t.state.name for t in study.get_trials(deepcopy=False)]).value_counts()
    prov = provenance(cfg.latency.device)
    objs = ", ".join(f"{o.label} ({o.direction})" for o in cfg.objectives_resolved())
    budgets = ", ".join(b.describe() for b in cfg.budgets()) or "none"
    ref = ", ".join(f"{k}={v:.4g}" for k, v in zip(front.keys, front.reference, strict=True))
    items = {
        "space": cfg.space, "data": cfg.data.name, "objectives": objs, "budgets": budgets,
        "sampler": cfg.sampler.name, "trials": ", ".join(f"{k} {v}" for k, v in states.items()),
        "feasible complete": front.n_feasible, **_free_rung(study), **_ended_by(cfg, study),
        "front size": len(front.trials), **_shrink_line(cfg, front),
        "hypervolume": f"{front.hypervolume:.6g} (reference {ref})", **settings_rows(cfg),
        "report device": prov["device"], "git": prov["git"], "generated (UTC)": prov["time_utc"],
        "versions": ", ".join(f"{k} {v}" for k, v in prov["versions"].items()),
    }
    rows = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>"
                   for k, v in items.items())
    changed = overrides(cfg)
    desc = f"<p>{html.escape(cfg.description)}</p>" if cfg.description else ""
    if changed:  # the file's description may describe a schedule or scoring this run replaced
        listed = "".join(f"<li><code>{html.escape(k)}</code>: {html.escape(v)}</li>"
                         for k, v in changed.items())
        desc = (f"<p class='warn'>This run overrode its study file ({len(changed)} field(s)); "
                "the file's description below may describe what was replaced:</p>"
                f"<ul>{listed}</ul>{desc}")
    return f"<h1>Study {html.escape(cfg.name)}</h1>{desc}<table class='meta'>{rows}</table>"


def _shrink_line(cfg: StudyConfig, front: summary.Front) -> dict[str, str]:
    """The header's line for ``pareto.shrink``, when the study asks for it."""
    if cfg.pareto.shrink == "off":
        return {}
    how = (front.shrink_note or "picked on the trained accuracies shrunk toward their trend on "
           f"the log of the rung-0 prior ({cfg.schedule.prior}); the measured values and the "
           "hypervolume are unchanged")
    return {"front (pareto.shrink)": how}


def _ended_by(cfg: StudyConfig, study: optuna.Study) -> dict[str, str]:
    """The header's line on what ended the last run of each worker (``n_trials``, ``timeout``,
    a signal), beside the limits the config set."""
    limits = f"n_trials {cfg.n_trials}" + (f", timeout {cfg.timeout:g} s" if cfg.timeout else "")
    ends = sorted({v for k, v in study.user_attrs.items() if k.startswith("stopped_by:")})
    return {"limits": limits, **({"ended by": "; ".join(ends)} if ends else {})}


def _free_rung(study: optuna.Study) -> dict[str, str]:
    """The header's line for a free rung 0 (``schedule.prior``), when the study has one."""
    free = [t for t in study.get_trials(deepcopy=False) if is_prior(t)]
    if not free:
        return {}
    over = sum(1 for t in free if t.user_attrs.get("feasible") is False)
    return {"rung 0 (free prior)": f"{len(free)} candidates scored by "
            f"{free[0].user_attrs['prior']} without training ({over} over a budget); "
            "not in the front or the counts above"}


_CSS = """body{font-family:sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;
font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px;text-align:left}
table.meta th{background:#f3f3f3}img{max-width:100%;margin:1em 0}
.warn{background:#fff3cd;padding:6px}.note{background:#eef;padding:6px}
.wide{overflow-x:auto}summary{cursor:pointer;margin:1em 0}"""


def write_report(study_dir: str | Path) -> Path:
    cfg, study, study_dir = store.load_dir(study_dir)
    front = summary.front(cfg, study)
    frame = store.write_trials(study_dir, study)
    figs = [(_png(pareto_figure(cfg, study, front), study_dir / "report_pareto.png"),
             "Pareto front")]
    numbers, hv = summary.history(cfg, study)
    figs.append((_png(hv_figure(numbers, hv, cfg, study), study_dir / "report_hypervolume.png"),
                 "hypervolume over trials"))
    if len(front.keys) > 2:
        figs.append((_png(pairs_figure(cfg, study, front), study_dir / "report_pairs.png"),
                     "objective pairs"))
    on_front = {t.number for t in front.trials}
    frame.insert(2, "front", frame["number"].isin(on_front))
    # successive halving: which rung each result is, and a free rung 0's prior, up front
    ahead = [c for c in ("rung", "prior", "prior_score") if c in frame.columns]
    frame = frame[[*frame.columns[:4], *ahead, *(c for c in frame.columns[4:]
                                               if c not in ahead)]]
    note = digital_below_note(cfg, front)
    parts = [_header(cfg, study, front), "<h2>Figures</h2>",
             *[_img(b, alt) for b, alt in figs],
             "<h2>Pareto front</h2>", _table(_front_frame(cfg, front, study_dir)),
             f"<p class='note'>{html.escape(note)}</p>" if note else "",
             _change_section(cfg, study, front),
             _finalize_section(study_dir), "<h2>All trials</h2>",
             _table(short_table(cfg, study, on_front), "trials"),
             f"<details><summary>Every stored column ({len(frame.columns)}; also in trials.csv "
             "and trials.parquet)</summary>", _table(frame, "trials"), "</details>"]
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(cfg.name)}"
            f"</title><style>{_CSS}</style></head><body>{''.join(parts)}</body></html>")
    out = study_dir / "report.html"
    out.write_text(page)
    return out
