"""Model cards: every metric with its hardware model, device and spread, versions, study config.

``trial_card`` gathers what a study trial knows; ``write_card`` writes ``card.json`` and a
Markdown rendering ``card.md`` of the same content.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from optuna.trial import FrozenTrial

from hw_cost.analog_cost import AnalogFigures
from nas.study.config import StudyConfig
from nas.study.objectives import METRICS

_ACC = re.compile(r"^acc_(?P<hw>[A-Za-z0-9_]+?)(?:@(?P<time>[0-9a-z.]+))?$")
_UNITS = {m.column: m.unit for m in (METRICS.get(n) for n in METRICS.list())}
_LATENCY = ("latency_ms", "latency_p10_ms", "latency_p90_ms", "latency_cv", "latency_repeats")
_ROOF = ("roof_fraction", "attained_flops", "roof_flops", "arithmetic_intensity")


_SUFFIX = (("_ms", "ms"), ("_us", "us"), ("_uj", "uJ"), ("_bytes", "bytes"),
           ("_fraction", "fraction"), ("_per_s", "1/s"), ("flops", "FLOP"), ("_seconds", "s"))


def _unit(key: str) -> str:
    return next((unit for suffix, unit in _SUFFIX if key.endswith(suffix)), "")


def describe_metric(key: str, value: float, attrs: dict[str, Any], cfg: StudyConfig,
                    info: dict[str, Any]) -> dict[str, Any]:
    """What a metric value means: unit, hardware model, drift time, device or data split."""
    out: dict[str, Any] = {"key": key, "value": value}
    m = _ACC.match(key)
    if m:
        out.update(unit="fraction", hw=m["hw"], time=m["time"] or ("0s" if m["hw"] != "digital"
                                                                   else None),
                   split=f"{cfg.data.name} validation")
        images = attrs.get(f"{key}_images", attrs.get("acc_digital_images"))
        if images is not None:
            out["images"] = int(images)
        if f"{key}_se" in attrs:
            out["se"] = attrs[f"{key}_se"]
        if f"{key}_std" in attrs:  # spread over programmings, and how many there were
            out.update(std=attrs[f"{key}_std"],
                       repeats=int(attrs.get(f"{key}_repeats", cfg.hw_eval.repeats)))
        if m["hw"] != "digital" and f"{m['hw']}_adabs" in attrs:
            out["adabs_images"] = int(attrs[f"{m['hw']}_adabs"])
        return out
    out["unit"] = _UNITS.get(key) or _unit(key)
    for hw in re.findall(r"^([A-Za-z0-9_]+?)_analog_", key):
        out["hw"] = hw  # coverage measured by analog.evaluate for that hardware model
    if key.startswith("latency"):
        out["device"] = info.get("device_name", cfg.latency.device)
        out.update(batch_size=cfg.latency.batch_size, dtype=cfg.latency.dtype,
                   threads=cfg.latency.threads, form=info.get("form", "eager"))
    if key.startswith("analog_") or key.endswith("energy_uj"):
        out["estimate"] = True
    return out


ENERGY_SOURCE = ("estimates from per-operation figures, not measurements: analog tiles from the "
                 "HERMES PCM chip (Le Gallo et al., Nat. Electron. 2023), the digital reference "
                 "from Horowitz (ISSCC 2014) scaled to the same 14 nm node with SRAM access "
                 "(hw_cost.analog_cost.AnalogFigures)")


def energy_section(attrs: dict[str, Any], info: dict[str, Any]) -> dict[str, Any] | None:
    """Analog and digital energy per inference side by side, or None without an estimate."""
    if "analog_energy_uj" not in attrs:
        return None
    options = json.loads(info.get("analog_cost_options") or "{}")
    return {"estimate": True, "analog_uj": attrs["analog_energy_uj"],
            "digital_reference_uj": attrs.get("digital_ref_energy_uj"),
            "analog_mac_fraction": attrs.get("analog_mac_fraction"),
            "hardware_model": info.get("analog_cost_hw"), "options": options,
            "tile_size": attrs.get("analog_tile_size"), "source": ENERGY_SOURCE,
            # every energy figure names its read mode (HERMES: one-phase 9.76, four 2.48 TOPS/W)
            "read_mode": info.get("analog_read_mode", AnalogFigures().read_mode)}


def _energy_lines(energy: dict[str, Any]) -> list[str]:
    tiles = f", {_fmt(energy.get('tile_size'))}-row tiles" if energy.get("tile_size") else ""
    tiles += f", {energy['read_mode']} read" if energy.get("read_mode") else ""
    hw = energy.get("hardware_model") or "default figures"
    share = 100 * (energy.get("analog_mac_fraction") or 0.0)
    if energy.get("options"):
        hw += " with " + ", ".join(f"{k}={v}" for k, v in energy["options"].items())
    return ["", "## Energy per inference (estimate)", "",
            "| hardware | energy (uJ) |", "|---|---|",
            f"| analog accelerator ({hw}{tiles}; {share:.0f}% of MACs on tiles) | "
            f"{_fmt(energy['analog_uj'])} |",
            f"| same network on the digital reference | "
            f"{_fmt(energy.get('digital_reference_uj'))} |", "",
            f"Both are {energy['source']}."]


_ESTIMATE_PARTS = ("_std", "_se", "_median", "_repeats", "_images")


def _is_estimate_part(key: str, attrs: dict[str, Any]) -> bool:
    """``acc_pcm@1d_se`` and the like: shown in the row of the accuracy they belong to."""
    return any(key.endswith(p) and key[: -len(p)] in attrs for p in _ESTIMATE_PARTS)


def trial_card(cfg: StudyConfig, trial: FrozenTrial, *, extra: dict | None = None
               ) -> dict[str, Any]:
    attrs = dict(trial.user_attrs)
    info = attrs.get("info") or {}
    objs = cfg.objectives_resolved()
    numeric = {k: v for k, v in attrs.items()
               if isinstance(v, int | float) and not isinstance(v, bool)
               and not _is_estimate_part(k, attrs) and k != "worker"}
    card = {
        "title": f"{cfg.space} {attrs.get('arch')}",
        "study": cfg.name, "trial": trial.number, "space": cfg.space, "arch": attrs.get("arch"),
        **({"hardware": info["hardware"]} if info.get("hardware") else {}),
        "objectives": [{"key": o.key, "label": o.label, "direction": o.direction, "value": v}
                       for o, v in zip(objs, trial.values or [], strict=False)],
        "budgets": [b.describe() for b in cfg.budgets()],
        "feasible": attrs.get("feasible", True),
        "latency": {k: attrs[k] for k in _LATENCY if k in attrs}
        | {"device": info.get("device_name", cfg.latency.device),
           "batch_size": cfg.latency.batch_size, "dtype": cfg.latency.dtype,
           "threads": cfg.latency.threads, "form": info.get("form", "eager")},
        "roofline": {k: attrs[k] for k in _ROOF if k in attrs}
        | {k: info[k] for k in ("ceiling", "memory_level", "bound") if k in info},
        "metrics": [describe_metric(k, v, attrs, cfg, info) for k, v in sorted(numeric.items())],
        "data": cfg.data.model_dump(),
        "proxy_training": cfg.train.model_dump() | {"seed": cfg.seed},
        "hw_eval": cfg.hw_eval.model_dump(),
        "energy": energy_section(attrs, info),
        "config": cfg.dump(),
    }
    return card | (extra or {})


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return "" if v is None else str(v)


def to_markdown(card: dict[str, Any]) -> str:
    lines = [f"# {card.get('title', 'model')}", ""]
    for key in ("study", "trial", "space", "arch", "hardware", "feasible"):
        if key in card:
            lines.append(f"- **{key}**: `{card[key]}`")
    if card.get("objectives"):
        lines += ["", "## Objectives", "", "| objective | direction | value |", "|---|---|---|"]
        lines += [f"| {o['label']} | {o['direction']} | {_fmt(o['value'])} |"
                  for o in card["objectives"]]
    if card.get("latency"):
        lat = card["latency"]
        lines += ["", "## Latency", "", f"median {_fmt(lat.get('latency_ms'))} ms "
                  f"(p10 {_fmt(lat.get('latency_p10_ms'))}, p90 {_fmt(lat.get('latency_p90_ms'))}"
                  f", CV {_fmt(lat.get('latency_cv'))}, {lat.get('latency_repeats')} repeats) on "
                  f"{lat.get('device')}, batch {lat.get('batch_size')}, {lat.get('dtype')}, "
                  f"{lat.get('threads')} thread(s), form {lat.get('form', 'eager')}"]
    roof = card.get("roofline") or {}
    if roof.get("roof_fraction") is not None:
        lines += ["", f"Roofline: {_fmt(roof['roof_fraction'])} of the roof "
                  f"({_fmt(roof.get('attained_flops'))} of {_fmt(roof.get('roof_flops'))} "
                  f"FLOP/s attained); binding ceiling: {roof.get('ceiling', roof.get('bound'))}"
                  f" (working set in {roof.get('memory_level', '?')})"]
    if card.get("energy"):
        lines += _energy_lines(card["energy"])
    if card.get("metrics"):
        lines += ["", "## Every metric", "",
                  "Accuracies are estimates: mean ± standard error, the std over programmings, "
                  "how many programmings and on how many images.", "",
                  "| metric | value | ± SE | std | programmings | images | unit | hardware model "
                  "| drift time | measured on |", "|---|---|---|---|---|---|---|---|---|---|"]
        for m in card["metrics"]:
            where = m.get("device") or m.get("split") or ("estimate" if m.get("estimate") else "")
            lines.append(f"| {m['key']} | {_fmt(m['value'])} | {_fmt(m.get('se'))} | "
                         f"{_fmt(m.get('std'))} | {_fmt(m.get('repeats'))} | "
                         f"{_fmt(m.get('images'))} | {m.get('unit', '')} | {_fmt(m.get('hw'))} | "
                         f"{_fmt(m.get('time'))} | {where} |")
    for section in ("test", "onnx", "finalize"):
        if card.get(section):
            lines += ["", f"## {section.capitalize()}", "", "```json",
                      json.dumps(card[section], indent=2, default=str), "```"]
    prov = card.get("provenance") or {}
    if prov:
        lines += ["", "## Provenance", "", f"- device: {prov.get('device')}",
                  f"- git: {prov.get('git')}", f"- time (UTC): {prov.get('time_utc')}",
                  "- versions: " + ", ".join(f"{k} {v}" for k, v in
                                            (prov.get("versions") or {}).items())]
    if card.get("config"):
        lines += ["", "## Study config", "", "```yaml",
                  yaml.safe_dump(card["config"], sort_keys=False).rstrip(), "```"]
    return "\n".join(lines) + "\n"


def write_card(folder: str | Path, card: dict[str, Any]) -> None:
    folder = Path(folder)
    (folder / "card.json").write_text(json.dumps(card, indent=2, default=str))
    (folder / "card.md").write_text(to_markdown(card))
