"""``hwnas supernet refine``: the top front members of a supernet study, fine-tuned standalone.

An entry point beside ``nas.finalize``: it reads a finished study (``nas.study.store``), takes its
front (``nas.results.summary``), fine-tunes each member from its inherited weights
(``nas.scoring.supernet``), re-scores it like a trial and exports it (``nas.results.export``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hwnas.train.loop import evaluate, fit
from nas.results import summary
from nas.results.export import arch_dirname, export_model
from nas.results.export_study import study_hw
from nas.scoring import glue
from nas.scoring.evaluate import Evaluator
from nas.scoring.supernet import inherited_model
from nas.study import store


def refine_front(study_dir: str | Path, *, top: int | None = None, epochs: float | None = None,
                 log: Callable[[str], Any] = print) -> list[dict[str, Any]]:
    """Fine-tune the top front members standalone from their inherited weights, re-score them
    like a trial, and export them to ``<study>/refined/<arch>/``; returns before/after rows."""
    cfg, study, study_dir = store.load_dir(study_dir)
    ev = Evaluator(cfg)
    top = cfg.supernet.refine_top if top is None else top
    rows = []
    for t in summary.front(cfg, study).trials[:top]:
        arch = t.user_attrs["arch"]
        model = inherited_model(cfg, ev.data, arch, {}, {})
        t0 = time.perf_counter()
        fit(model, ev.data, glue.fit_config(cfg, epochs=epochs or cfg.supernet.refine_epochs))
        limit = cfg.hw_eval.eval_limit
        x, y = ev.data.x_val[:limit], ev.data.y_val[:limit]
        after = {"acc_digital": evaluate(model, x, y)["acc"]}
        for hw, times in ev.hw_times().items():
            if hw != "digital":
                after |= glue.hw_accuracy(cfg, model, ev.data, hw, times, x, y)
        before = {k: t.user_attrs.get(k) for k in after}
        rows.append({"trial": t.number, "arch": arch, "before": before, "after": after,
                     "refine_seconds": time.perf_counter() - t0})
        meta = {"name": ev.data.name, "in_chans": ev.data.in_chans,
                "num_classes": ev.data.num_classes, "img_size": ev.data.img_size}
        export_model(model, study_dir / "refined" / arch_dirname(arch), space=cfg.space,
                     arch=arch, data=meta, hw=study_hw(cfg), metrics=after, config=cfg.dump(),
                     card={"refined": rows[-1]}, onnx=False)
        log(f"refined trial {t.number} {arch}: {before} -> {after}")
    (study_dir / "refined").mkdir(exist_ok=True)
    (study_dir / "refined" / "index.json").write_text(json.dumps(rows, indent=1, default=str))
    return rows
