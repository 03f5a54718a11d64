"""The analog report as files: ``report.json`` (everything), ``drift.png``, ``sensitivity.png``
and ``report.html`` (the verdict first, then the evidence). Reads only the JSON-ready dict."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

Z95 = 1.96


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}"


def verdict(rep: dict[str, Any]) -> str:
    """One line a reader can act on: the loss at the sensitivity time and what fixes it."""
    if rep["warnings"]:
        return "Do not trust these numbers: " + rep["warnings"][0]
    cfg, dig = rep["config"], rep["digital_acc"]
    hw = cfg["hw"][0]
    key = "adabs" if "adabs" in rep["curves"][hw] else "no_adabs"
    points = rep["curves"][hw][key]["points"]
    at = next((p for p in points if p["label"] == cfg["sensitivity_time"]), points[-1])
    loss = 100 * (dig["mean"] - at["acc_mean"])
    head = (f"{hw} at {at['label']}: {_pct(at['acc_mean'])} +- {_pct(at['acc_se'])} % "
            f"(SE) vs {_pct(dig['mean'])} % digital, a loss of {loss:.1f} pt")
    return head + _advice(rep["recommendation"], cfg["budget"]) + _fit(rep.get("energy", {}))


def _advice(rec: dict[str, Any] | None, budget: float) -> str:
    if rec is None:
        return f" (budget {budget} pt; sensitivity not measured)."
    if not rec["digital"]:
        return f": within the {budget} pt budget with every mappable layer analog."
    status = "meets" if rec["meets_budget"] else "still misses"
    return (f". Keep {', '.join(rec['digital'])} digital: measured loss "
            f"{rec['verified_loss']:.1f} pt, which {status} the {budget} pt budget.")


def _fit(energy: dict[str, Any]) -> str:
    cost = list(energy.values())[-1] if energy else None
    if not cost:
        return ""
    return (f" Mapped: {cost['cores_used']} cores, {cost['chips_needed']} chip(s) "
            f"({'fits' if cost['fits_on_chip'] else 'does not fit'} one), "
            f"{cost['energy_uj']:.3g} uJ/image (estimate, "
            f"{cost.get('read_mode', 'four_phase').replace('_', '-')} read).")


def _drift_png(rep: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for hw, curves in rep["curves"].items():
        for key, res in curves.items():
            t = [max(p["t"], 1.0) for p in res["points"]]
            m = [100 * p["acc_mean"] for p in res["points"]]
            se = [100 * Z95 * p["acc_se"] for p in res["points"]]
            sd = [100 * p["acc_std"] for p in res["points"]]
            style = "-" if key == "adabs" else "--"
            line, = ax.plot(t, m, style, marker="o", label=f"{hw} ({key.replace('_', ' ')})")
            ax.fill_between(t, [a - b for a, b in zip(m, se, strict=True)],
                            [a + b for a, b in zip(m, se, strict=True)],
                            color=line.get_color(), alpha=0.25)
            ax.errorbar(t, m, yerr=sd, fmt="none", ecolor=line.get_color(), capsize=3, lw=0.8)
    dig = rep["digital_acc"]["mean"] * 100
    ax.axhline(dig, color="k", lw=1, label=f"digital {dig:.1f}%")
    ax.set_xscale("log")
    ax.set_xlabel("time after programming (s)")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title("mean; band: 95% CI (1.96 SE); bars: +-1 std over programmings", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _sensitivity_png(rep: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = rep["sensitivity"][:25]
    fig, ax = plt.subplots(figsize=(7, 0.25 * len(rows) + 1.5))
    y = list(range(len(rows)))[::-1]
    for off, key, label in ((0.2, "gain_only_digital", "gain when kept digital"),
                            (-0.2, "loss_only_analog", "loss when only it is analog")):
        kept = [(v, r[key]) for v, r in zip(y, rows, strict=True) if r[key] is not None]
        ax.barh([v + off for v, _ in kept], [100 * e["mean"] for _, e in kept], height=0.4,
                xerr=[100 * Z95 * e["se"] for _, e in kept], label=label)
    ax.set_yticks(y, [r["layer"] for r in rows], fontsize=7)
    ax.set_xlabel("accuracy points (95% CI)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _table(rows: list[list[Any]], head: list[str]) -> str:
    cells = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>"
                   for r in rows)
    return f"<table><tr>{cells}</tr>{body}</table>"


def _coverage_html(cov: dict[str, Any]) -> str:
    shares = [[k, v["layers"], _pct(v["weight_share"]), _pct(v["mac_share"])]
              for k, v in cov["shares"].items()]
    off = [[r["layer"], r["type"], r["status"], r["reason"], r["weights"], r["macs"]]
           for r in cov["layers"] if r["status"] != "analog"]
    return (_table(shares, ["status", "layers", "% weights", "% MACs"])
            + "<p>Layers not on analog tiles:</p>"
            + (_table(off, ["layer", "type", "status", "reason", "weights", "MACs"])
               if off else "<p>none</p>"))


def _curves_html(rep: dict[str, Any]) -> str:
    rows = []
    for hw, curves in rep["curves"].items():
        for key, res in curves.items():
            for p in res["points"]:
                rows.append([hw, key, p["label"], _pct(p["acc_mean"]), _pct(p["acc_se"]),
                             _pct(p["acc_std"]), len(p["accs"]), p["images"]])
    paired = [[hw, d.get("against", rep["config"]["hw"][0]), d["t"], f"{100 * d['mean']:+.2f}",
               f"{100 * d['se']:.2f}", d["repeats"]]
              for hw, diffs in rep["paired"].items() for d in diffs]
    out = _table(rows, ["device", "AdaBS", "t", "acc %", "SE %", "std % (programmings)",
                        "programmings", "images"])
    if paired:
        out += ("<p>Paired differences (same programming seeds per repeat):</p>"
                + _table(paired, ["device", "against", "t", "diff pt", "SE pt", "pairs"]))
    return out + _wpo_html(rep.get("wpo", []))


def _wpo_html(runs: list[dict[str, Any]]) -> str:
    """The optimised programmings: what the optimiser reached and what it cost."""
    if not runs:
        return ""
    rows = [[f"{w['hw']}+wpo", f"{w['baseline_tnmse']:.4f}", f"{w['optimized_tnmse']:.4f}",
             "yes" if w["beats_baseline"] else "no", w["settings"]["popsize"],
             w["settings"]["maxiter"], f"{w['seconds']:.0f}"] for w in runs]
    return ("<p>Weight-programming optimisation (aihwkit's WeightProgrammingOptimizer, "
            "Mackin et al. 2022): weight error over the drift times (TNMSE) with the device's "
            "own programming and with the optimised table, which the +wpo curves use:</p>"
            + _table(rows, ["curve", "TNMSE device", "TNMSE optimised", "lower",
                            "population per dim", "iterations", "seconds"]))


def _code(text: str) -> str:
    """``text`` escaped, its docstring-style ````name```` spans as code."""
    parts = html.escape(text).split("``")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def _points(e: dict[str, Any] | None) -> list[str]:
    """An estimate's mean and SE in points, or two dashes where it was not measured."""
    return ["-", "-"] if e is None else [f"{100 * e['mean']:.2f}", f"{100 * e['se']:.2f}"]


def _sensitivity_html(rep: dict[str, Any]) -> str:
    if not rep["sensitivity"]:
        return "<p>not measured (--no-sensitivity)</p>"
    rows = [[s["layer"], s["weights"], *_points(s["gain_only_digital"]),
             *_points(s["loss_only_analog"])] for s in rep["sensitivity"]]
    ref, cfg = rep.get("sensitivity_reference"), rep["config"]
    reference = "" if ref is None else (
        f"<p>Losses are measured from the digital model on the same "
        f"{cfg['sensitivity_images']} images, {_pct(ref['mean'])} % "
        + (f"with its batch norms re-estimated on the same {cfg['adabs']} AdaBS images as "
           f"every analog score ({_pct(rep['digital_acc']['mean'])} % as trained, on "
           f"{cfg['images']} images)" if "adabs" in rep["curves"][cfg["hw"][0]]
           else "as trained") + ".</p>")
    top = cfg.get("sensitivity_top")
    screened = "" if top is None else (
        f"<p>Gains measured for the {top} layers with the largest loss alone (a gain needs "
        "every other layer emulated; `--sensitivity-top` sets how many); the rest: "
        "not measured.</p>")
    rec = rep["recommendation"]
    tries = [[", ".join(t["digital"]) or "(none)", f"{t['loss']:.2f}", f"{t['se']:.2f}"]
             for t in rec["tries"]]
    return (reference + screened + _table(rows, ["layer", "weights", "gain kept digital pt", "SE",
                                     "loss alone pt", "SE"])
            + f"<p>Greedy on the gains: predicted loss {rec['predicted_loss']:.2f} pt; "
              "verified by evaluation:</p>" + _table(tries, ["digital layers", "loss pt", "SE"]))


def _energy_html(energy: dict[str, Any]) -> str:
    rows = [[k, f"{v['energy_uj']:.3g}", f"{v['digital_reference_energy_uj']:.3g}",
             v["tiles"], v["cores_used"], v["chips_needed"], v["fits_on_chip"]]
            for k, v in energy.items() if isinstance(v, dict) and "tiles" in v]
    first = next((v for v in energy.values() if isinstance(v, dict) and "assumptions" in v), {})
    notes = "".join(f"<li>{html.escape(str(k))}: {html.escape(str(v))}</li>"
                    for k, v in (first.get("assumptions") or {}).items())
    return (_table(rows, ["mapping", "energy uJ/image", "digital reference uJ", "tiles",
                          "cores", "chips", "fits one chip"])
            + f"<p>Assumptions (hw_cost.analog_cost, an estimate):</p><ul>{notes}</ul>")


_CSS = ("body{font-family:sans-serif;max-width:980px;margin:auto}table{border-collapse:collapse;"
        "font-size:12px;margin:6px 0}td,th{border:1px solid #ccc;padding:2px 6px}"
        ".verdict{font-size:17px;background:#eef;padding:8px}.warn{background:#fdd;padding:8px}")


def write_report(rep: dict[str, Any], out: str | Path, *, title: str) -> dict[str, Path]:
    """Write report.json, the PNGs and report.html into ``out``; returns their paths."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rep = {**rep, "verdict": verdict(rep)}
    paths = {"json": out / "report.json", "drift": out / "drift.png",
             "html": out / "report.html"}
    paths["json"].write_text(json.dumps(rep, indent=1, default=str))
    _drift_png(rep, paths["drift"])
    sens = ""
    if rep["sensitivity"]:
        paths["sensitivity"] = out / "sensitivity.png"
        _sensitivity_png(rep, paths["sensitivity"])
        sens = '<img src="sensitivity.png">'
    warn = "".join(f'<p class="warn">{html.escape(w)}</p>' for w in rep["warnings"])
    body = (f"<h1>{html.escape(title)}</h1>{warn}<p class='verdict'>"
            f"{html.escape(rep['verdict'])}</p>"
            f"<h2>Coverage</h2>{_coverage_html(rep['coverage'])}"
            f"<h2>Drift, 1 s to 1 year</h2><img src='drift.png'>{_curves_html(rep)}"
            f"<p>{_code(rep['se_meaning'])}</p>"
            f"<h2>Per-layer sensitivity at {html.escape(rep['config']['sensitivity_time'])}"
            f"</h2>{sens}{_sensitivity_html(rep)}"
            f"<h2>Energy and chip fit</h2>{_energy_html(rep.get('energy', {}))}"
            f"<h2>Settings</h2><pre>{html.escape(json.dumps(rep['config'], indent=1))}\n"
            f"seconds: {html.escape(json.dumps(rep['seconds']))}</pre>")
    paths["html"].write_text(f"<!doctype html><html><head><meta charset='utf-8'><title>"
                             f"{html.escape(title)}</title><style>{_CSS}</style></head>"
                             f"<body>{body}</body></html>")
    return paths
