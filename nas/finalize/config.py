"""What ``hwnas finalize`` is asked to do (``FinalizeConfig``), and the study it reads: its
config and its exported Pareto checkpoints."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from hwnas.common.errors import ConfigError, Problem
from hwnas.compress.distill import DistillConfig
from hwnas.compress.prune import PruneConfig
from nas.study.config import StudyConfig, validate_study

BACKENDS = ("torchrun", "ray")



@dataclass(kw_only=True)
class FinalizeConfig:
    """What ``hwnas finalize`` does to each chosen Pareto model."""

    top: int = 1
    """Finalize the first ``top`` models of the exported front (its export order)."""
    prune: float | None = None
    """Channel ratio to prune; or use ``latency_budget_ms`` / ``macs_budget``; none: no pruning."""
    latency_budget_ms: float | None = None
    macs_budget: float | None = None
    importance: str = "magnitude"
    distill: bool = False
    teacher: str | None = None
    """A ``hwnas-checkpoint/1`` file; default: the most accurate (digital) Pareto model."""
    distill_mode: str = "soft"
    alpha: float = 0.5
    temperature: float = 4.0
    epochs: float = 5.0
    lr: float | None = None
    """Peak learning rate of the retraining; default: the study's."""
    nproc: int = 1
    backend: str = "torchrun"
    workers: int = 2
    train_limit: int | None = None
    """Train images used (default: the whole train split, not the study's proxy budget)."""
    bn_images: int | None = None
    """Training images that re-estimate the batch norms after pruning or training shorter than
    an epoch; default: as many as AdaBS uses for the analog score (``hw_eval.adabs``, else
    ``analog.defaults.ADABS_IMAGES``); 0: keep the trained statistics."""
    onnx: bool = True

    def validate(self) -> FinalizeConfig:
        problems = []
        targets = [v for v in (self.prune, self.latency_budget_ms, self.macs_budget)
                   if v is not None]
        if len(targets) > 1:
            problems.append(Problem("finalize prune target", "give at most one of --prune, "
                                    "--latency-budget, --macs-budget", targets, "keep one"))
        for name, ok, rule, fix in (
                ("top", self.top >= 1, "must be >= 1", "e.g. --top 3"),
                ("epochs", self.epochs > 0, "must be > 0", "e.g. --epochs 5"),
                ("nproc", self.nproc >= 1, "must be >= 1", "e.g. --nproc 2"),
                ("workers", self.workers >= 1, "must be >= 1", "e.g. --workers 2"),
                ("bn_images", self.bn_images is None or self.bn_images >= 0, "must be >= 0",
                 "e.g. --bn-images 256, or 0 to keep the trained statistics"),
                ("backend", self.backend in BACKENDS, f"must be one of {list(BACKENDS)}",
                 "use torchrun (this machine) or ray (a Ray cluster)")):
            if not ok:
                problems.append(Problem(f"finalize {name}", rule, getattr(self, name), fix))
        if self.distill:
            try:
                DistillConfig(mode=self.distill_mode, alpha=self.alpha,
                              temperature=self.temperature).validate()
            except ConfigError as err:
                problems += err.problems
        if problems:
            raise ConfigError(problems)
        return self

    def prune_config(self) -> PruneConfig | None:
        if self.prune is None and self.latency_budget_ms is None and self.macs_budget is None:
            return None
        return PruneConfig(ratio=self.prune, latency_budget_ms=self.latency_budget_ms,
                           macs_budget=self.macs_budget, importance=self.importance).validate()


def study_config(study_dir: Path) -> StudyConfig:
    path = study_dir / "config.yaml"
    if not path.is_file():
        raise ConfigError.one("study folder", "must contain config.yaml (written by hwnas search)",
                              str(study_dir), "pass runs/<study> of a study that was searched")
    return validate_study(yaml.safe_load(path.read_text()))


def pareto_models(study_dir: Path) -> list[Path]:
    """Exported checkpoints in the front's order (``pareto/index.json``), trained ones only."""
    root = study_dir / "pareto"
    index = root / "index.json"
    if index.is_file():
        folders = [root / m["folder"] for m in json.loads(index.read_text())["models"]]
    else:
        folders = sorted(p for p in root.glob("*") if p.is_dir())
    found = [f / "model.pt" for f in folders if (f / "model.pt").is_file()]
    if not found:
        raise ConfigError.one("finalize", "needs exported Pareto checkpoints (pareto/*/model.pt)",
                              str(root), f"run `hwnas export {study_dir}` first (tabular studies "
                              "have no trained weights to finalize)")
    return found


def asked(fc: FinalizeConfig) -> dict[str, Any]:
    """The options as given, less those the chosen launch ignores (``workers`` is Ray's,
    ``nproc`` torchrun's): a record must not show a worker count that never ran."""
    unused = "nproc" if fc.backend == "ray" else "workers"
    return {k: v for k, v in asdict(fc).items() if k != unused}

