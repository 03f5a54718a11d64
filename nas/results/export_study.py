"""``hwnas export runs/<study>``: every feasible Pareto model to ``runs/<study>/pareto/<arch>/``."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwnas.train.data import DataSplits, load_data
from hwnas.train.loop import evaluate
from nas.results import summary
from nas.results.cards import trial_card, write_card
from nas.results.export import candidate_dirname, export_model
from nas.study import store
from nas.study.config import StudyConfig
from search_spaces import get_space

if TYPE_CHECKING:
    from optuna.trial import FrozenTrial


def study_hw(cfg: StudyConfig) -> str:
    """The hardware model the study optimizes accuracy for (digital when none is named)."""
    return next((o.hw for o in cfg.objectives_resolved() if o.metric.uses_hw and o.hw),
                "digital")


def _data(cfg: StudyConfig) -> DataSplits:
    d = cfg.data
    return load_data(d.name, root=d.root, val_fraction=d.val_fraction, seed=d.seed,
                     train_limit=d.train_limit, test_limit=d.test_limit, **d.options)


def _clear_stale(root: Path, keep: set[str]) -> None:
    """Remove model folders of an earlier export that left the front (only ours: card.json)."""
    if not root.is_dir():
        return
    for folder in root.iterdir():
        if folder.is_dir() and folder.name not in keep and (folder / "card.json").exists():
            shutil.rmtree(folder)


def export_study(study_dir: str | Path, *, top: int | None = None, onnx: bool | None = None,
                 log: Callable[[str], None] = print) -> list[dict[str, Any]]:
    cfg, study, study_dir = store.load_dir(study_dir)
    front = summary.front(cfg, study)
    trials = front.trials[: top or cfg.export.top or None]
    root = study_dir / "pareto"
    names = {t.number: candidate_dirname(t.user_attrs) for t in trials}
    _clear_stale(root, set(names.values()))
    data, rows = None, []
    for t in trials:
        folder = root / names[t.number]
        card = trial_card(cfg, t)
        weights = store.load_weights(study_dir, study, t)
        if weights is None:
            card["weights"] = "none: metrics come from a table; no model was trained"
            folder.mkdir(parents=True, exist_ok=True)
            write_card(folder, card)
        else:
            data = data or _data(cfg)
            card = _export_trained(cfg, t, weights, data, folder, card,
                                   cfg.export.onnx if onnx is None else onnx)
        rows.append({"trial": t.number, "arch": t.user_attrs["arch"], "folder": folder.name,
                     **dict(zip(front.keys, t.values, strict=True)),
                     "onnx_ok": (card.get("onnx") or {}).get("ok")})
        log(f"exported trial {t.number} -> {folder}")
    (root.mkdir(parents=True, exist_ok=True))
    (root / "index.json").write_text(json.dumps(
        {"study": cfg.name, "objectives": front.keys, "directions": front.directions,
         "reference": front.reference, "hypervolume": front.hypervolume, "models": rows},
        indent=2, default=str))
    return rows


def _export_trained(cfg: StudyConfig, trial: FrozenTrial, weights: dict, data: DataSplits,
                    folder: Path, card: dict, onnx: bool) -> dict:
    arch = trial.user_attrs["arch"]
    model = get_space(cfg.space).build_for(arch, data)
    model.load_state_dict(weights)
    test = evaluate(model, data.x_test, data.y_test)
    card["test"] = {"acc_digital": test["acc"], "loss": test["loss"],
                    "split": f"{data.name} test ({len(data.y_test)} images)",
                    "note": "digital accuracy of the proxy-trained weights, measured at export"}
    metrics = {k: v for k, v in trial.user_attrs.items()
               if isinstance(v, int | float) and not isinstance(v, bool)}
    meta = {"name": data.name, "in_chans": data.in_chans, "num_classes": data.num_classes,
            "img_size": data.img_size}
    return export_model(model, folder, space=cfg.space, arch=arch, data=meta, hw=study_hw(cfg),
                        metrics=metrics, config=cfg.dump(), card=card, onnx=onnx,
                        tolerance=cfg.export.onnx_tolerance)
