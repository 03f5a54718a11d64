"""The figures before and after: static costs, accuracies under the study's protocol, latency
timed side by side, and where an accuracy change comes from."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

import hw_cost
from analog.precision import sampling_se
from hw_cost.compare import compare_latency
from hwnas.train.data import DataSplits, load_data
from hwnas.train.loop import evaluate
from nas.finalize.config import FinalizeConfig
from nas.scoring import glue
from nas.scoring.evaluate import Evaluator
from nas.study.config import StudyConfig
from search_spaces.checkpoint import load_checkpoint


def val_split(data: DataSplits, cfg: StudyConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """The validation images every before/after accuracy (and the teacher choice) uses."""
    limit = cfg.hw_eval.eval_limit
    return data.x_val[:limit], data.y_val[:limit]


def pick_teacher(paths: list[Path], given: str | None, data: DataSplits, cfg: StudyConfig
                 ) -> tuple[nn.Module, str, float]:
    """(teacher, its path, its digital val accuracy). Default: the most accurate of ``paths``,
    measured now on ``val_split``: stored study metrics may lack digital accuracy (an analog
    objective) or come from another subset, and the students are among ``paths``, so the
    choice is never weaker than any of them."""
    x, y = val_split(data, cfg)
    device = cfg.train.device
    if given:
        model = load_checkpoint(given)[0]
        return model, str(given), evaluate(model, x, y, device=device)["acc"]
    scored = []
    for p in paths:
        model = load_checkpoint(p)[0]
        scored.append((evaluate(model, x, y, device=device)["acc"], str(p), model))
    acc, best, model = max(scored, key=lambda t: t[0])
    return model, best, acc


def measure(model: nn.Module, data: DataSplits, cfg: StudyConfig, *, hwa: bool = True
            ) -> dict[str, float]:
    """The study's static cost and accuracy figures for ``model`` (flat, numeric); ``hwa=False``
    skips the study's HWA fine-tuning (the weights were already trained for the hardware).
    Latency is timed by ``side_by_side``, before and after together."""
    static = hw_cost.static_costs(model, data.input_shape)
    out = {"params": float(static["params"]), "macs": float(static["macs"]),
           "model_bytes": float(static["model_bytes"])}
    x, y = val_split(data, cfg)
    splits = {"acc_digital": (x, y), "test_acc_digital": (data.x_test, data.y_test)}
    for key, (xs, ys) in splits.items():
        acc = evaluate(model, xs, ys, device=cfg.train.device)["acc"]
        # as a study scores it: the binomial SE of the image sample, and its size
        out.update({key: acc, f"{key}_se": sampling_se(acc, len(ys)),
                    f"{key}_images": float(len(ys))})
    scored_cfg = cfg if hwa else cfg.model_copy(
        update={"hw_eval": cfg.hw_eval.model_copy(update={"hwa": "off"})})
    for hw, times in Evaluator(cfg).hw_times().items():
        if hw != "digital":
            out.update(glue.hw_accuracy(scored_cfg, model, data, hw, times, x, y))
    return out


def side_by_side(before: nn.Module, after: nn.Module, data: DataSplits, cfg: StudyConfig
                 ) -> dict[str, Any]:
    """Latency of ``before`` and ``after`` timed interleaved in one run (``hw_cost.compare``) on
    the study's latency settings and deployed form, for about twice a study's timing cap."""
    lat = cfg.latency
    return compare_latency({"before": before, "after": after}, data.input_shape,
                           glue.measure_spec(cfg),
                           seconds=max(2.0, 2 * lat.max_seconds, lat.min_seconds))


def latency_figures(timing: dict[str, Any], name: str) -> dict[str, float]:
    t = timing["models"][name]
    return {"latency_ms": t["median_ms"], "latency_p10_ms": t["p10_ms"],
            "latency_p90_ms": t["p90_ms"], "latency_cv": t["cv"]}


def accuracy_source(before: dict[str, float], after: dict[str, float], cfg: StudyConfig,
                    fc: FinalizeConfig, data: DataSplits, teacher: str | None) -> str:
    """Where a change of accuracy comes from: the finalize training differs from the study's
    proxy training (images, epochs, a teacher), and pruning removes capacity."""
    study_images = cfg.data.train_limit or len(data.x_train)
    images = fc.train_limit or len(data.x_train)
    gain = after.get("acc_digital", 0.0) - before.get("acc_digital", 0.0)
    causes = [f"retraining {fc.epochs:g} epochs on {images:,} train images"
              + (" (the whole split)" if fc.train_limit is None else "")
              + f", where the study trained {cfg.train.epochs:g} epochs on {study_images:,}"]
    if teacher:
        causes.append(f"distillation from {teacher}")
    verb = "gain" if gain > 0 else "change"
    return (f"digital val accuracy {verb} {gain:+.3f} (same {len(val_split(data, cfg)[0]):,} "
            f"validation images before and after) comes from: " + "; ".join(causes)
            + (", despite pruning" if gain > 0 and fc.prune_config() is not None else ""))


def load_splits(cfg: StudyConfig, fc: FinalizeConfig) -> DataSplits:
    d = cfg.data
    return load_data(d.name, root=d.root, val_fraction=d.val_fraction, seed=d.seed,
                     train_limit=fc.train_limit, test_limit=d.test_limit)


def prune_measure(cfg: StudyConfig, input_shape: tuple[int, int, int], *, timed: bool
                  ) -> Callable[[nn.Module], dict[str, float]]:
    """What pruning re-measures after each step: params and MACs, and with ``timed`` the median
    latency on the study's latency settings (a latency budget holds where the study timed)."""

    def measure(model: nn.Module) -> dict[str, float]:
        static = hw_cost.static_costs(model, input_shape)
        out = {"params": float(static["params"]), "macs": float(static["macs"])}
        if timed:
            out["latency_ms"] = hw_cost.measure_latency(model, input_shape,
                                                        glue.measure_spec(cfg)).median_ms
        return out

    return measure

