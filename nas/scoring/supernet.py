"""``evaluator: supernet``: candidates inherit their weights from one trained supernet.

The supernet is loaded once per process (or trained as the study's step 0 when its checkpoint
is missing; a file lock lets one worker train while the others wait). Each candidate is
extracted as the space's own model, its BatchNorm statistics re-estimated on ``bn_images``
training images, and then scored by the evaluator's usual code: digital accuracy, every
hardware model at its drift times, and latency (measured on the space's model of the arch, the
same structure as the extracted one). ``refine_front`` fine-tunes the top front members
standalone from their inherited weights and exports them.
"""

from __future__ import annotations

import fcntl
import json
import time
from pathlib import Path
from typing import Any

from hwnas.common.errors import ConfigError
from nas.study.config import StudyConfig

_NETS: dict[tuple[str, str], Any] = {}  # (checkpoint, space) -> (Supernet, metadata)


def checkpoint_path(cfg: StudyConfig) -> Path:
    return Path(cfg.supernet.checkpoint or Path("runs") / cfg.name / "supernet.pt")


def train_config(cfg: StudyConfig):  # noqa: ANN201 - SupernetTrainConfig
    """Step 0's training config: the study's data subset and seed, then ``supernet.train``."""
    from search_spaces.supernet.train import SupernetTrainConfig

    base = {"space": cfg.space, "data": cfg.data.name, "train_limit": cfg.data.train_limit,
            "seed": cfg.seed}
    try:
        return SupernetTrainConfig(**{**base, **cfg.supernet.train})
    except TypeError as err:
        raise ConfigError.one("supernet.train", "takes SupernetTrainConfig fields only",
                              sorted(cfg.supernet.train), f"fix the field names ({err})") from None


def _train_once(cfg: StudyConfig, path: Path) -> None:
    """Train the missing supernet, once across processes (others wait on the lock)."""
    from search_spaces.supernet.train import train_supernet

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not path.exists():
            summary = train_supernet(train_config(cfg), path.with_suffix(".partial.pt"),
                                     resume=True)
            path.with_suffix(".partial.pt").replace(path)
            path.with_suffix(".json").write_text(json.dumps(summary, indent=1))


def supernet_for(cfg: StudyConfig, data) -> tuple[Any, dict[str, Any]]:  # noqa: ANN001
    """The study's supernet and its metadata, loaded once per process."""
    from search_spaces.supernet.train import load_supernet

    path = checkpoint_path(cfg)
    key = (str(path.resolve()), cfg.space)
    if key not in _NETS:
        if not path.exists():
            if cfg.supernet.checkpoint:
                raise ConfigError.one("supernet.checkpoint", "must be an existing file",
                                      str(path), "train it with `hwnas supernet train "
                                      f"{cfg.space} --out {path}` or leave it unset")
            _train_once(cfg, path)
        net, meta = load_supernet(path, space=cfg.space)
        shape = {"in_chans": data.in_chans, "num_classes": data.num_classes,
                 "img_size": data.img_size}
        if any(meta[k] != v for k, v in shape.items()):
            raise ConfigError.one("supernet.checkpoint", "must match the study's data shape",
                                  {k: meta[k] for k in shape}, f"train one for {shape}")
        _NETS[key] = (net, meta)
    return _NETS[key]


def inherited_model(cfg: StudyConfig, data, arch: str, metrics: dict[str, float],  # noqa: ANN001
                    info: dict[str, Any]):  # noqa: ANN201 - nn.Module
    """``arch`` with inherited weights and recalibrated BN; records its time and source."""
    from search_spaces.supernet.train import inherit

    net, meta = supernet_for(cfg, data)
    t0 = time.perf_counter()
    model = inherit(net, arch, data.x_train[:cfg.supernet.bn_images])
    metrics["inherit_seconds"] = time.perf_counter() - t0
    metrics["supernet_train_seconds"] = float(meta["seconds"])
    info |= {"evaluator": "supernet", "supernet": str(checkpoint_path(cfg)),
             "supernet_steps": meta["step"], "supernet_hwa_noise": meta["config"]["hwa_noise"],
             "bn_images": min(cfg.supernet.bn_images, len(data.x_train))}
    return model


def refine_front(study_dir: str | Path, *, top: int | None = None,
                 epochs: float | None = None, log=print) -> list[dict[str, Any]]:  # noqa: ANN001
    """Fine-tune the top front members standalone from their inherited weights, re-score them
    like a trial, and export them to ``<study>/refined/<arch>/``; returns before/after rows."""
    from hwnas.train.loop import evaluate, fit
    from nas.results import summary
    from nas.results.export import arch_dirname, export_model
    from nas.results.export_study import study_hw
    from nas.scoring import glue
    from nas.scoring.evaluate import Evaluator
    from nas.study import store

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
