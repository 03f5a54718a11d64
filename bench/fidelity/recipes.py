"""Scoring recipes compared by ``python -m bench.fidelity``: the study evaluator with each
recipe's settings.

Every recipe starts from the quickstart study (resnet, 5,000 Fashion-MNIST training images, one
epoch, ``pcm`` at 1 d) and changes one thing more than the one before it, so each step's gain
in ranking quality and its cost in seconds per candidate can be read off the table:

- ``quickstart``: as at 637f7ed: 500 validation images, 3 programmings, digital batch-norm
  statistics (the seeding is always the reproducible one now; on 637f7ed it was not);
- ``seeded``: + the whole validation cap (4,000 images) that the fixed split allows;
- ``adabs``: + AdaBS on 512 training images;
- ``adaptive``: + programmings grown to a 1-point standard error (at most 20);
- ``hwa``: + half an epoch of HWA fine-tuning (``hw_eval.hwa: auto``);
- ``default_1ep``: the scoring defaults of ``nas.study.config.HwEvalCfg`` (AdaBS on 256 images,
  programmings and images grown to a 2-point SE) on the one-epoch training;
- ``b32``: as ``default_1ep``, the same images in batches of 32 (4x the optimiser steps);
- ``default``: what ``studies/quickstart.yaml`` used until 2026-11-29: ``default_1ep`` trained
  for 3 epochs (``QUICKSTART_TRAIN``, fixed here so the stored rows keep their meaning);
- ``default_hwa``: ``default`` + half an epoch of HWA fine-tuning before analog scoring;
- ``eco`` / ``eco_lean``: ``default``'s optimiser steps on 15,000 images seen once (EcoNAS), with
  ``default``'s or ``e2_lean``'s scoring;
- ``e2_lean``: the cheapest recipe with more than one epoch that keeps AdaBS: the ``default``
  training for 2 epochs, scored with exactly 3 programmings on 500 images, AdaBS on 128 (about
  the old quickstart recipe's seconds per candidate: where tau lands at that cost); what
  ``studies/quickstart.yaml`` uses since 2026-11-29.

Scores go to ``bench/data/fidelity/scores.csv``, one row per (recipe, seed, arch); rows already
there are kept, so a run can stop and go on.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

import pandas as pd

from bench.fidelity.truth import DATA, by_cost, space_of

SCORES = DATA / "scores.csv"
TIMING = DATA / "timing.csv"  # `bench.fidelity time`: seconds per candidate, all recipes in one run
BASE: dict[str, Any] = {
    "name": "fidelity", "space": "resnet", "seed": 0, "n_trials": 1,
    "data": {"name": "fashion_mnist", "train_limit": 5000},
    "objectives": [{"metric": "accuracy", "hw": "pcm", "time": "1d"}],
    "train": {"epochs": 1, "batch_size": 128, "lr": 0.1, "label_smoothing": 0.1,
              "warmup_epochs": 0.1, "threads": 1},
    "latency": {"device": "cpu", "batch_size": 1, "threads": 1, "max_seconds": 0.5},
}


QUICKSTART_TRAIN: dict[str, Any] = {"epochs": 3, "batch_size": 128, "lr": 0.1,
                                     "label_smoothing": 0.1, "warmup_epochs": 0.1, "threads": 2}
"""The quickstart's training section until 2026-11-29, which ``default`` and the recipes built
on it scored with (the study file now trains 2 epochs: ``e2_lean``)."""


def _quickstart_train() -> dict[str, Any]:
    return dict(QUICKSTART_TRAIN)


_OLD_EVAL = {"repeats": 3, "eval_limit": 500, "target_se": None, "adabs": 0, "hwa": "off"}
RECIPES: dict[str, dict[str, Any]] = {
    "quickstart": {"hw_eval": _OLD_EVAL},
    "seeded": {"hw_eval": {**_OLD_EVAL, "eval_limit": 4000}},
    "adabs": {"hw_eval": {**_OLD_EVAL, "eval_limit": 4000, "adabs": 512}},
    "adaptive": {"hw_eval": {**_OLD_EVAL, "eval_limit": 4000, "adabs": 512, "target_se": 0.01,
                             "max_repeats": 20}},
    "hwa": {"hw_eval": {**_OLD_EVAL, "eval_limit": 4000, "adabs": 512, "target_se": 0.01,
                        "max_repeats": 20, "hwa": "auto"}},
    "default_1ep": {},  # nas.study.config.HwEvalCfg defaults
    "b32": {"train": {"batch_size": 32, "lr": 0.05}},
    "default": {"train": {**_quickstart_train(), "threads": 1}},
    # the new default plus a short HWA fine-tune before analog scoring (hw_eval.hwa: auto)
    "default_hwa": {"train": {**_quickstart_train(), "threads": 1}, "hw_eval": {"hwa": "auto"}},
    "e2_lean": {"train": {**_quickstart_train(), "threads": 1, "epochs": 2},
                "hw_eval": {"repeats": 3, "target_se": None, "eval_limit": 500, "adabs": 128}},
    # EcoNAS (Zhou et al., CVPR 2020): the same optimiser steps as `default` (3 epochs of 5,000
    # images) spent on 15,000 images seen once: less overfitting of a small subset per step.
    "eco": {"data": {"train_limit": 15000},
            "train": {**_quickstart_train(), "threads": 1, "epochs": 1}},
    # `default` scored on the HERMES-like model the studies score (`pcm_static`), beside the
    # truth's own pcm_static column: what the change of scored model does to the ranking.
    "default_static": {"train": {**_quickstart_train(), "threads": 1},
                       "objectives": [{"metric": "accuracy", "hw": "pcm_static", "time": "1d"}]},
    "eco_lean": {"data": {"train_limit": 15000},
                 "train": {**_quickstart_train(), "threads": 1, "epochs": 1},
                 "hw_eval": {"repeats": 3, "target_se": None, "eval_limit": 500, "adabs": 128}},
}


# Timed only (``bench.fidelity time``): the quickstart recipe as the code at 637f7ed ran it, with a
# pass over the validation split after every training epoch. Its scores are ``quickstart``'s
# (validation is read-only); only its cost differs.
TIMING_ONLY: dict[str, dict[str, Any]] = {
    "quickstart_637f7ed": {"hw_eval": _OLD_EVAL, "train": {"validation": "epoch"}},
}


def study(recipe: str, seed: int, space: str = "resnet") -> dict[str, Any]:
    """The recipe as a one-trial study of ``space`` (the recipes are the same on every space:
    the quickstart's training and scoring)."""
    raw = copy.deepcopy(BASE)
    for key, value in {**RECIPES, **TIMING_ONLY}[recipe].items():
        raw[key] = {**raw.get(key, {}), **value} if isinstance(value, dict) else value
    raw["seed"], raw["space"] = seed, space
    return raw


def _done() -> set[tuple[str, int, str]]:
    if not SCORES.is_file():
        return set()
    df = pd.read_csv(SCORES)
    return set(zip(df.recipe, df.seed, df.arch, strict=True))


def score_all(archs: list[str], recipes: list[str], seeds: list[int], *, threads: int) -> None:
    import torch

    from nas.scoring.evaluate import Evaluator
    from nas.study.config import validate_study

    torch.set_num_threads(threads)
    done = _done()
    for space in dict.fromkeys(space_of(a) for a in archs):  # resnet, then mbconv
        evaluators = {(r, s): Evaluator(validate_study(study(r, s, space)))
                      for r in recipes for s in seeds}
        mine = [a for a in archs if space_of(a) == space]
        for arch in by_cost(space, mine):  # every recipe on one arch before the next arch
            for (recipe, seed), evaluator in evaluators.items():
                if (recipe, seed, arch) not in done:
                    _append(_score_one(evaluator, recipe, seed, arch))


def time_all(archs: list[str], recipes: list[str], *, threads: int, seed: int = 0) -> Path:
    """Seconds per candidate of every recipe on the same ``archs``, in one process, recipes
    interleaved per arch (a same-run comparison on a shared host); rewrites ``TIMING``."""
    import torch

    from nas.scoring.evaluate import Evaluator
    from nas.study.config import validate_study

    torch.set_num_threads(threads)
    evaluators = {r: Evaluator(validate_study(study(r, seed))) for r in recipes}
    rows = [{**_score_one(ev, r, seed, arch), "threads": threads}
            for arch in by_cost("resnet", archs) for r, ev in evaluators.items()]
    pd.DataFrame(rows).to_csv(TIMING, index=False)
    return TIMING


def _score_one(evaluator: Any, recipe: str, seed: int, arch: str) -> dict[str, Any]:
    start = time.perf_counter()
    out = evaluator.evaluate(arch)
    hw = evaluator.cfg.objectives[0].hw
    m, key = out.metrics, f"acc_{hw}@1d"
    row = {"recipe": recipe, "seed": seed, "arch": arch, "acc_digital": m["acc_digital"],
           "acc": m[key], "acc_se": m[f"{key}_se"], "acc_std": m[f"{key}_std"],
           "repeats": m[f"{key}_repeats"], "images": m[f"{key}_images"],
           "seconds": out.info.get("seconds_train_eval", time.perf_counter() - start),
           "train_seconds": m.get("train_seconds"), "hwa_seconds": m.get("pcm_hwa_s", 0.0),
           "train_loss_sum": m.get("train_loss_sum")}
    print(f"{recipe} seed {seed} {arch}: {hw}@1d {100 * row['acc']:.1f} +- "
          f"{100 * row['acc_se']:.1f} ({row['repeats']:.0f} x {row['images']:.0f} images), "
          f"{row['seconds']:.1f} s", flush=True)
    return row


def _append(row: dict[str, Any]) -> None:
    """Add one row; the file is rewritten whole, so a new column lines up with the old rows."""
    SCORES.parent.mkdir(parents=True, exist_ok=True)
    old = pd.read_csv(SCORES) if Path(SCORES).is_file() else pd.DataFrame()
    pd.concat([old, pd.DataFrame([row])], ignore_index=True).to_csv(SCORES, index=False)
