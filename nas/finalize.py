"""``hwnas finalize runs/<study>``: prune -> distill-train with DDP -> re-measure -> export.

For each of the top-K exported Pareto models (``runs/<study>/pareto/*/model.pt``):

1. **measure before**: latency and static costs on the study's latency settings, digital
   accuracy, and accuracy under the study's hardware models and drift times with the study's
   protocol (``nas.glue.hw_accuracy``: repeats, compensation, HWA epochs);
2. **prune** (``compress.prune``) to a channel ratio, a MACs budget or a measured-latency budget;
3. **train** on the study's data (whole train split unless limited) with ``train.ddp``: in this
   process, under ``torchrun`` (``nproc`` > 1) or on Ray Train workers; with ``distill`` the loss
   is Hinton KD from the teacher (the most accurate Pareto model, or a given checkpoint);
4. for analog hardware, **HWA fine-tuning** (with distillation when asked), kept in the weights;
5. **measure after** with the same protocol, and **export** like ``hwnas export`` into
   ``runs/<study>/final/<arch>/`` with a before/after table in the model card; every model's
   figures also go to ``runs/<study>/final/summary.json`` for the study report.
"""

from __future__ import annotations

import copy
import json
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import yaml
from torch import nn

from hwnas.common.errors import ConfigError, Problem
from hwnas.common.provenance import provenance

BACKENDS = ("torchrun", "ray")
# Before/after rows of the model card: (key, label, unit).
TABLE = (("params", "parameters", ""), ("macs", "MACs per image", ""),
         ("latency_ms", "latency (median)", "ms"), ("acc_digital", "accuracy, digital (val)", ""),
         ("test_acc_digital", "accuracy, digital (test)", ""))


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
                ("backend", self.backend in BACKENDS, f"must be one of {list(BACKENDS)}",
                 "use torchrun (this machine) or ray (a Ray cluster)")):
            if not ok:
                problems.append(Problem(f"finalize {name}", rule, getattr(self, name), fix))
        if self.distill:
            from hwnas.compress.distill import DistillConfig

            try:
                DistillConfig(mode=self.distill_mode, alpha=self.alpha,
                              temperature=self.temperature).validate()
            except ConfigError as err:
                problems += err.problems
        if problems:
            raise ConfigError(problems)
        return self

    def prune_config(self):  # noqa: ANN201 - hwnas.compress.prune.PruneConfig | None
        from hwnas.compress.prune import PruneConfig

        if self.prune is None and self.latency_budget_ms is None and self.macs_budget is None:
            return None
        return PruneConfig(ratio=self.prune, latency_budget_ms=self.latency_budget_ms,
                           macs_budget=self.macs_budget, importance=self.importance).validate()


def study_config(study_dir: Path):  # noqa: ANN201 - nas.config.StudyConfig
    from nas.config import validate_study

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


def pick_teacher(paths: list[Path], given: str | None) -> tuple[nn.Module, str]:
    from nas.export import load_checkpoint

    if given:
        return load_checkpoint(given)[0], str(given)
    scored = [(load_checkpoint(p)[1]["metrics"].get("acc_digital", float("-inf")), str(p))
              for p in paths]
    best = max(scored)[1]
    return load_checkpoint(best)[0], best


def measure(model: nn.Module, data: Any, cfg: Any, *, hwa: bool = True) -> dict[str, float]:
    """The study's cost and accuracy figures for ``model`` (flat, numeric); ``hwa=False`` skips
    the study's HWA fine-tuning (the weights were already trained for the hardware)."""
    import hw_cost
    from nas import glue
    from nas.evaluate import Evaluator
    from hwnas.train.loop import evaluate

    lat = cfg.latency
    timing = hw_cost.measure_latency(model, data.input_shape, device=lat.device,
                                     batch_size=lat.batch_size, dtype=lat.dtype,
                                     threads=lat.threads, max_seconds=lat.max_seconds,
                                     min_seconds=lat.min_seconds)
    static = hw_cost.static_costs(model, data.input_shape)
    out = {"latency_ms": timing.median_ms, "latency_p10_ms": timing.p10_ms,
           "latency_p90_ms": timing.p90_ms, "latency_cv": timing.cv,
           "params": float(static["params"]), "macs": float(static["macs"]),
           "model_bytes": float(static["model_bytes"])}
    limit = cfg.hw_eval.eval_limit
    x, y = data.x_val[:limit], data.y_val[:limit]
    device = cfg.train.device
    out["acc_digital"] = evaluate(model, x, y, device=device)["acc"]
    out["test_acc_digital"] = evaluate(model, data.x_test, data.y_test, device=device)["acc"]
    scored_cfg = cfg if hwa else cfg.model_copy(
        update={"hw_eval": cfg.hw_eval.model_copy(update={"hwa_epochs": 0.0})})
    for hw, times in Evaluator(cfg).hw_times().items():
        if hw != "digital":
            out.update(glue.hw_accuracy(scored_cfg, model, data, hw, times, x, y))
    return out


def _load_data(cfg: Any, fc: FinalizeConfig):  # noqa: ANN202 - hwnas.train.data.DataSplits
    from hwnas.train.data import load_data

    d = cfg.data
    return load_data(d.name, root=d.root, val_fraction=d.val_fraction, seed=d.seed,
                     train_limit=fc.train_limit, test_limit=d.test_limit)


def _prune(model: nn.Module, data: Any, cfg: Any, fc: FinalizeConfig,
           work: Path) -> dict[str, Any]:
    """Prune once; a rerun with the same options reuses the pruned student, so an interrupted
    training resumes from its checkpoint (other options start the model over)."""
    from hwnas.compress.prune import prune

    options = {k: v for k, v in asdict(fc).items() if k not in ("top", "onnx")}
    done = work / "options.json"
    if done.is_file() and json.loads(done.read_text()) == json.loads(json.dumps(options)):
        return json.loads((work / "prune.json").read_text())
    if work.exists():  # other options than last time: start this model over
        shutil.rmtree(work)
    pcfg = fc.prune_config()
    summary: dict[str, Any] = {"target": None}
    if pcfg is not None:
        lat = cfg.latency  # a latency budget holds on the study's latency settings
        pcfg.latency = {"device": lat.device, "batch_size": lat.batch_size, "dtype": lat.dtype,
                        "threads": lat.threads, "max_seconds": lat.max_seconds,
                        "min_seconds": lat.min_seconds}
        calib = (data.x_train[:64], data.y_train[:64])
        summary = prune(model, data.input_shape, pcfg, calib=calib).summary()
        summary["config"] = asdict(pcfg)
    work.mkdir(parents=True, exist_ok=True)
    torch.save(model, work / "student.pt")
    (work / "prune.json").write_text(json.dumps(summary, indent=1))
    done.write_text(json.dumps(options))
    return summary


def _train(work: Path, teacher: nn.Module | None, cfg: Any, fc: FinalizeConfig
           ) -> dict[str, Any]:
    from nas import glue
    from hwnas.train.ddp import DDPJob, Dist, FileStore, run_job, train

    fit = asdict(glue.fit_config(cfg, epochs=fc.epochs, **({"lr": fc.lr} if fc.lr else {})))
    loss: dict[str, Any] = {}
    if teacher is not None:
        torch.save(teacher, work / "teacher.pt")
        loss = {"loss_factory": "hwnas.compress.distill:make_loss",
                "loss_kwargs": {"teacher_path": str(work / "teacher.pt"), "mode": fc.distill_mode,
                                "alpha": fc.alpha, "temperature": fc.temperature}}
    d = cfg.data
    job = DDPJob(model_path=str(work / "student.pt"), out_dir=str(work / "train"), data=d.name,
                 data_kwargs={"root": d.root, "val_fraction": d.val_fraction, "seed": d.seed,
                              "train_limit": fc.train_limit, "test_limit": d.test_limit},
                 fit=fit, checkpoint_every=200, log_every=50, **loss)
    if fc.backend == "ray":
        from hwnas.train.ray_train import fit_ray

        return fit_ray(job, workers=fc.workers, address=cfg.ray.address,
                       use_gpu=torch.device(fit["device"]).type == "cuda")
    if fc.nproc > 1:
        return run_job(job, nproc=fc.nproc)
    return train(job, Dist(device=fit["device"]), FileStore(job.out_dir))


def _hwa(student: nn.Module, teacher: nn.Module | None, data: Any, cfg: Any,
         fc: FinalizeConfig) -> dict[str, Any] | None:
    """HWA fine-tuning for an analog target (as the search scored it), kept in the weights."""
    import analog
    from hwnas.compress.distill import DistillConfig, Distiller, hwa_distill
    from nas import glue
    from nas.export_study import study_hw

    hw, epochs = study_hw(cfg), cfg.hw_eval.hwa_epochs
    if epochs <= 0 or analog.get_hw(hw).kind != "analog":
        return None
    fit = glue.fit_config(cfg, epochs=epochs)
    if teacher is not None:
        dcfg = DistillConfig(mode=fc.distill_mode, alpha=fc.alpha, temperature=fc.temperature)
        loss = Distiller(teacher.to(cfg.train.device), dcfg)
        res = hwa_distill(student, data, hw, fit, loss)
    else:
        res = analog.hwa_fit(student, data, hw, fit)
    return {"hw": hw, "epochs": res.epochs, "val_acc": res.val_acc, "distilled": bool(teacher)}


def before_after(before: dict[str, float], after: dict[str, float]) -> list[dict[str, Any]]:
    keys = [k for k, _, _ in TABLE] + sorted(k for k in after if k.startswith("acc_")
                                             and k != "acc_digital" and not k.endswith("_std"))
    labels = {k: (label, unit) for k, label, unit in TABLE}
    rows = []
    for k in keys:
        if k in before and k in after:
            label, unit = labels.get(k, (k, ""))
            rows.append({"key": k, "label": label, "unit": unit, "before": before[k],
                         "after": after[k], "std_before": before.get(f"{k}_std"),
                         "std_after": after.get(f"{k}_std"),
                         "ratio": after[k] / before[k] if before[k] else None})
    return rows


def table_markdown(rows: list[dict[str, Any]]) -> str:
    def cell(v: Any, std: Any) -> str:
        text = f"{v:.4g}" if isinstance(v, float) else str(v)
        return f"{text} ± {std:.2g}" if isinstance(std, float) else text

    lines = ["## Before / after finalize", "", "| metric | before | after | after/before |",
             "|---|---|---|---|"]
    for r in rows:
        ratio = f"{r['ratio']:.3f}" if r["ratio"] is not None else ""
        unit = f" ({r['unit']})" if r["unit"] else ""
        lines.append(f"| {r['label']}{unit} | {cell(r['before'], r['std_before'])} | "
                     f"{cell(r['after'], r['std_after'])} | {ratio} |")
    return "\n".join(lines) + "\n"


def finalize_one(path: Path, teacher: nn.Module | None, data: Any, cfg: Any, fc: FinalizeConfig,
                 final_root: Path, log: Any = print) -> dict[str, Any]:
    """The whole recipe for one exported Pareto model; returns its summary row."""
    from nas.export import arch_dirname, export_model, load_checkpoint, read_card

    model, meta = load_checkpoint(path)
    name = arch_dirname(meta["arch"])
    work = final_root / "work" / name
    log(f"[{name}] measuring the exported model")
    before = measure(model, data, cfg)
    student = copy.deepcopy(model)
    pruned = _prune(student, data, cfg, fc, work)
    student = torch.load(work / "student.pt", weights_only=False)
    log(f"[{name}] pruned: {pruned.get('after') or 'not pruned'}; training {fc.epochs} epochs")
    trained = _train(work, teacher, cfg, fc)
    student.load_state_dict(torch.load(work / "train" / "final.pt", weights_only=True))
    hwa = _hwa(student, teacher, data, cfg, fc)
    after = measure(student.eval(), data, cfg, hwa=hwa is None)
    rows = before_after(before, after)
    summary = {"arch": meta["arch"], "space": meta["space"], "folder": name, "source": str(path),
               "before": before, "after": after, "table": rows, "prune": pruned,
               "train": {k: v for k, v in trained.items() if k != "ray_checkpoint"},
               "hwa": hwa, "teacher": fc.teacher if teacher is not None else None}
    card = {k: v for k, v in read_card(path.parent).items()
            if k not in ("onnx", "files", "provenance", "test")}
    card.update(title=f"{meta['space']} {meta['arch']} (finalized)", finalize=summary)
    out = final_root / name
    export_model(student, out, space=meta["space"], arch=meta["arch"], data=meta["data"],
                 hw=meta["hw"], metrics=after, config=cfg.dump(), card=card, onnx=fc.onnx,
                 tolerance=cfg.export.onnx_tolerance,
                 module=student if pruned.get("target") else None)
    with open(out / "card.md", "a") as fh:
        fh.write("\n" + table_markdown(rows))
    log(f"[{name}] exported to {out}")
    return summary


def finalize(study_dir: str | Path, fc: FinalizeConfig, *, log: Any = print,
             out: str | Path | None = None) -> dict[str, Any]:
    """Finalize the top models of ``study_dir`` into ``out`` (default ``study_dir/final``);
    writes ``summary.json`` there and returns it."""
    study_dir = Path(study_dir)
    fc.validate()
    fc.prune_config()  # a bad prune target fails before any work
    cfg = study_config(study_dir)
    paths = pareto_models(study_dir)[: fc.top]
    teacher = None
    if fc.distill:
        teacher, fc.teacher = pick_teacher(pareto_models(study_dir), fc.teacher)
        log(f"teacher: {fc.teacher}")
    data = _load_data(cfg, fc)
    final_root = Path(out) if out is not None else study_dir / "final"
    models = [finalize_one(p, teacher, data, cfg, fc, final_root, log) for p in paths]
    summary = {"study": cfg.name, "options": asdict(fc), "models": models,
               "provenance": provenance(cfg.train.device)}
    final_root.mkdir(parents=True, exist_ok=True)
    (final_root / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    return summary
