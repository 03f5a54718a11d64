"""What a run did, in the report's words: its schedule, training and scoring as run, the fields
it overrode against its study file, and the explanation of a reading that looks wrong (a
digital accuracy below the analog one)."""

from __future__ import annotations

from typing import Any

from hwnas.common.errors import HwnasError
from nas.results.summary import Front
from nas.study.config import StudyConfig
from nas.study.files import load_study


def _schedule(cfg: StudyConfig) -> str:
    s = cfg.schedule
    if s.type == "none":
        return "none: every trial trained at the full budget"
    text = f"{s.type}, eta {s.eta:g}, budget {s.min_budget:g}-{s.max_budget:g} {s.resource}"
    if s.prior:
        text += f"; free rung 0 on {s.prior}"
        if s.looks:
            text += (f", a screen of {s.looks} looks, {s.prior_promote} promoted"
                     + (f" (at most {s.promote_max})" if s.promote_max else ""))
    return text


def _count(value: float | None, none: str) -> str:
    return none if value is None else f"{value:,g}"


def settings_rows(cfg: StudyConfig) -> dict[str, str]:
    """Header rows: the schedule, training and scoring of this run, overrides applied."""
    if cfg.tabular is not None:
        return {"schedule (as run)": _schedule(cfg), "training and scoring (as run)":
                f"none: every metric looked up in {cfg.tabular.path}"}
    t, h, d = cfg.train, cfg.hw_eval, cfg.data
    length = f"{t.epochs:g} epochs" if t.epochs is not None else f"{t.steps} steps"
    training = (f"{length} on {_count(d.train_limit, 'all')} train images, batch "
                f"{t.batch_size}, lr {_count(t.lr, 'the optimizer default')}, "
                f"{_count(t.threads, 'torch default')} threads, {t.device}")
    until = (f"{h.repeats}-{h.max_repeats} programmings to SE {h.target_se:g}"
             if h.target_se is not None and h.max_repeats else f"{h.repeats} programmings")
    scoring = (f"{until}, {_count(h.eval_limit, 'all')} validation images, AdaBS on "
               f"{h.adabs} images, HWA {h.hwa}, drift compensation "
               f"{'on' if h.compensation else 'off'}"
               + (f", options {h.options}" if h.options else ""))
    return {"schedule (as run)": _schedule(cfg), "training (as run)": training,
            "scoring (as run)": scoring, "front picked on": f"pareto.shrink {cfg.pareto.shrink}"}


def _flat(raw: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(raw, dict) and raw:
        return {k: v for key, val in raw.items() for k, v in _flat(val, f"{prefix}{key}.").items()}
    return {prefix.rstrip("."): raw}


def overrides(cfg: StudyConfig) -> dict[str, str]:
    """``{field: "run value (file: value)"}`` against the study file of the same name, as
    ``--set`` or ``run(**overrides)`` changed it; empty when none or no such file is found."""
    try:
        base = load_study(cfg.name).dump()
    except (HwnasError, OSError):
        return {}
    ran, was = _flat(cfg.dump()), _flat(base)
    return {k: f"{ran.get(k)!r} (file: {was.get(k)!r})" for k in sorted(set(ran) | set(was))
            if ran.get(k) != was.get(k)}


def _below(attrs: dict[str, Any], key: str) -> bool:
    """Digital accuracy more than 2 SE (the analog score's) below the analog one."""
    dig, ana, se = (attrs.get(k) for k in ("acc_digital", key, f"{key}_se"))
    if not all(isinstance(v, int | float) for v in (dig, ana)):
        return False
    return dig < ana - 2 * (se if isinstance(se, int | float) else 0.0)


def digital_below_note(cfg: StudyConfig, front: Front) -> str:
    """Why a front member's digital accuracy may read below its analog one: the analog score
    re-estimates the batch norms (AdaBS) on training images; the digital one reads the running
    statistics, which lag the weights after a short training."""
    analog_keys = [k for k in front.keys if k.startswith("acc_") and k != "acc_digital"]
    low = [t.number for t in front.trials for k in analog_keys if _below(t.user_attrs, k)]
    if not low:
        return ""
    trials = ", ".join(map(str, sorted(set(low))))
    return (f"Trial(s) {trials}: digital accuracy more than 2 SE below the analog one. Not a "
            f"better chip: the analog score re-estimates every batch norm on "
            f"{cfg.hw_eval.adabs} training images (AdaBS, hw_eval.adabs) before it scores, while "
            f"the digital score reads the running statistics of training, which lag the "
            f"weights after a short proxy training ({cfg.train.epochs or 0:g} epochs). "
            "`hwnas finalize` re-estimates them before its digital figures.")
