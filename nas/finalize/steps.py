"""The recipe's steps for one model (prune, train, HWA, re-measure, export) and the whole run."""

from __future__ import annotations

import copy
import json
import shutil
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from torch import nn

import analog
from hwnas.common.provenance import provenance
from hwnas.compress.distill import DistillConfig, Distiller
from hwnas.compress.prune import prune
from hwnas.train.data import DataSplits
from hwnas.train.ddp import DDPJob, Dist, FileStore, run_job, train
from hwnas.train.ray_train import fit_ray
from nas.finalize.bn import bn_note, bn_step, stale_bn
from nas.finalize.config import FinalizeConfig, asked, pareto_models, study_config
from nas.finalize.measure import (
    accuracy_source,
    latency_figures,
    load_splits,
    measure,
    pick_teacher,
    prune_measure,
    side_by_side,
)
from nas.finalize.tables import before_after, table_markdown
from nas.results.export import export_model, read_card
from nas.results.export_study import study_hw
from nas.scoring import glue
from nas.study.config import StudyConfig
from search_spaces.checkpoint import load_checkpoint, save_checkpoint


def prune_student(model: nn.Module, data: DataSplits, cfg: StudyConfig, fc: FinalizeConfig,
           work: Path, meta: dict[str, Any]) -> dict[str, Any]:
    """Prune once; a rerun with the same options reuses the pruned student, so an interrupted
    training resumes from its checkpoint (other options start the model over)."""
    options = {k: v for k, v in asdict(fc).items() if k not in ("top", "onnx", "bn_images")}
    done = work / "options.json"
    if done.is_file() and json.loads(done.read_text()) == json.loads(json.dumps(options)):
        return json.loads((work / "prune.json").read_text())
    if work.exists():  # other options than last time: start this model over
        shutil.rmtree(work)
    pcfg = fc.prune_config()
    summary: dict[str, Any] = {"target": None}
    if pcfg is not None:
        calib = (data.x_train[:64], data.y_train[:64])
        measure = prune_measure(cfg, data.input_shape, timed=pcfg.latency_budget_ms is not None)
        summary = prune(model, data.input_shape, pcfg, measure=measure, calib=calib).summary()
        summary["config"] = {**asdict(pcfg), "latency": _timing(cfg)}
    work.mkdir(parents=True, exist_ok=True)  # the student as a checkpoint: no pickled module
    save_checkpoint(work / "student.pt", space=meta["space"], arch=meta["arch"],
                    state_dict=model.state_dict(), data=meta["data"], module=model)
    (work / "prune.json").write_text(json.dumps(summary, indent=1))
    done.write_text(json.dumps(options))
    return summary


def train_student(work: Path, teacher: nn.Module | None, cfg: StudyConfig, fc: FinalizeConfig
           ) -> dict[str, Any]:
    """Train ``work/student.pt``; ranks read it and the teacher (``fc.teacher``, a checkpoint)
    through ``search_spaces.checkpoint:load_model`` (``weights_only=True``)."""
    # the final model's training reports its validation accuracy every epoch
    fit = asdict(glue.fit_config(cfg, epochs=fc.epochs, validation="epoch",
                                 **({"lr": fc.lr} if fc.lr else {})))
    loss: dict[str, Any] = {}
    if teacher is not None:
        loss = {"loss_factory": "hwnas.compress.distill:make_loss",
                "loss_kwargs": {"teacher_factory": "search_spaces.checkpoint:load_model",
                                "teacher_kwargs": {"path": str(Path(fc.teacher).resolve())},
                                "mode": fc.distill_mode,
                                "alpha": fc.alpha, "temperature": fc.temperature}}
    d = cfg.data
    job = DDPJob(model_factory="search_spaces.checkpoint:load_model",
                 model_kwargs={"path": str((work / "student.pt").resolve())},
                 out_dir=str(work / "train"), data=d.name,
                 data_kwargs={"root": d.root, "val_fraction": d.val_fraction, "seed": d.seed,
                              "train_limit": fc.train_limit, "test_limit": d.test_limit},
                 fit=fit, checkpoint_every=200, log_every=50, **loss)
    if fc.backend == "ray":
        return fit_ray(job, workers=fc.workers, address=cfg.ray.address,
                       use_gpu=torch.device(fit["device"]).type == "cuda")
    if fc.nproc > 1:
        return run_job(job, nproc=fc.nproc)
    return train(job, Dist(device=fit["device"]), FileStore(job.out_dir))


def hwa_student(student: nn.Module, teacher: nn.Module | None, data: DataSplits, cfg: StudyConfig,
         fc: FinalizeConfig) -> dict[str, Any] | None:
    """HWA fine-tuning for an analog target (as the search scored it), kept in the weights."""
    hw, epochs = study_hw(cfg), cfg.hw_eval.hwa_epochs
    if epochs <= 0 or analog.get_hw(hw).kind != "analog":
        return None
    fit = glue.fit_config(cfg, epochs=epochs, validation="end")  # its val_acc is reported
    loss = None
    if teacher is not None:  # the student learns the noise-free teacher under the hw's noise
        dcfg = DistillConfig(mode=fc.distill_mode, alpha=fc.alpha, temperature=fc.temperature)
        loss = Distiller(teacher.to(cfg.train.device), dcfg)
    res = analog.hwa_fit(student, data, glue.hwa_target(cfg, hw), fit, loss_fn=loss)
    return {"hw": hw, "epochs": res.epochs, "val_acc": res.val_acc, "distilled": bool(teacher)}


def finalize_one(path: Path, teacher: nn.Module | None, data: DataSplits, cfg: StudyConfig,
                 fc: FinalizeConfig, final_root: Path, log: Callable[[str], object] = print,
                 teacher_acc: float | None = None) -> dict[str, Any]:
    """The whole recipe for one exported Pareto model; returns its summary row."""

    model, meta = load_checkpoint(path)
    name = path.parent.name  # its export folder's: the arch, and the chip where one was searched
    work = final_root / "work" / name
    log(f"[{name}] measuring the exported model")
    before = measure(model, data, cfg)
    student = copy.deepcopy(model)
    pruned = prune_student(student, data, cfg, fc, work, meta)
    student = load_checkpoint(work / "student.pt")[0]
    log(f"[{name}] pruned: {pruned.get('after') or 'not pruned'}; training {fc.epochs} epochs")
    trained = train_student(work, teacher, cfg, fc)
    student.load_state_dict(torch.load(work / "train" / "final.pt", weights_only=True))
    hwa = hwa_student(student, teacher, data, cfg, fc)
    bn = bn_step(student, data, cfg, fc, stale_bn(pruned, trained, hwa))
    if bn is not None:
        log(f"[{name}] batch norms re-estimated on {bn['images']} training images "
            f"({bn['layers']} layers) before scoring: {', '.join(bn['why'])}")
    after = measure(student.eval(), data, cfg, hwa=hwa is None)
    log(f"[{name}] timing before and after side by side")
    timing = side_by_side(model, student, data, cfg)
    before.update(latency_figures(timing, "before"))
    after.update(latency_figures(timing, "after"),
                 **{f"latency_{k}": v for k, v in timing["ratios"]["after"].items()})
    warnings = list(timing["warnings"])
    if teacher is not None and teacher_acc is not None and teacher_acc < before["acc_digital"]:
        warnings.append(f"the teacher ({teacher_acc:.3f}) is less accurate than the unpruned "
                        f"student ({before['acc_digital']:.3f}) on the validation images")
    notes = [accuracy_source(before, after, cfg, fc, data,
                             fc.teacher if teacher is not None else None), bn_note(bn)]
    rows = before_after(before, after)
    summary = {"arch": meta["arch"], "space": meta["space"], "folder": name, "source": str(path),
               "before": before, "after": after, "table": rows, "prune": pruned,
               "train": {k: v for k, v in trained.items() if k != "ray_checkpoint"},
               "hwa": hwa, "bn": bn, "teacher": fc.teacher if teacher is not None else None,
               "teacher_acc_digital": teacher_acc if teacher is not None else None,
               "latency": timing, "warnings": warnings, "notes": notes,
               "ran": what_ran(fc, pruned, trained, hwa, bn, after)}
    for w in warnings:
        log(f"[{name}] WARNING: {w}")
    card = {k: v for k, v in read_card(path.parent).items()
            if k not in ("onnx", "files", "provenance", "test")}
    card.update(title=f"{meta['space']} {meta['arch']} (finalized)", finalize=summary)
    out = final_root / name
    export_model(student, out, space=meta["space"], arch=meta["arch"], data=meta["data"],
                 hw=meta["hw"], metrics=after, config=cfg.dump(), card=card, onnx=fc.onnx,
                 tolerance=cfg.export.onnx_tolerance,
                 module=student if pruned.get("target") else None)
    with open(out / "card.md", "a") as fh:
        fh.write("\n" + table_markdown(rows, [*(f"WARNING: {w}" for w in warnings), *notes]))
    log(f"[{name}] exported to {out}")
    return summary


def what_ran(fc: FinalizeConfig, pruned: dict[str, Any], trained: dict[str, Any],
             hwa: dict[str, Any] | None, bn: dict[str, Any] | None,
             after: dict[str, float]) -> dict[str, Any]:
    """What one model's finalize actually did, read from the results rather than the flags:
    training processes, pruned ratio, epochs trained, images behind the batch norms (the
    re-estimation and AdaBS) and programmings behind each analog accuracy."""
    reached = pruned.get("after") or {}
    return {"backend": fc.backend, "processes": trained.get("world"),
            "prune_target": pruned.get("target"), "prune_ratio": reached.get("ratio"),
            "epochs": trained.get("epochs"), "steps": trained.get("steps"),
            "hwa_epochs": hwa["epochs"] if hwa else 0.0,
            "bn_images": bn["images"] if bn else 0,
            "adabs_images": {k.removesuffix("_adabs"): int(v) for k, v in after.items()
                             if k.endswith("_adabs")},
            "programmings": {k.removesuffix("_repeats"): int(v) for k, v in after.items()
                             if k.startswith("acc_") and k.endswith("_repeats")}}


def finalize(study_dir: str | Path, fc: FinalizeConfig, *, log: Callable[[str], object] = print,
             out: str | Path | None = None) -> dict[str, Any]:
    """Finalize the top models of ``study_dir`` into ``out`` (default ``study_dir/final``);
    writes ``summary.json`` there and returns it."""
    study_dir = Path(study_dir)
    fc.validate()
    fc.prune_config()  # a bad prune target fails before any work
    cfg = study_config(study_dir)
    paths = pareto_models(study_dir)[: fc.top]
    data = load_splits(cfg, fc)
    teacher = teacher_acc = None
    if fc.distill:
        teacher, fc.teacher, teacher_acc = pick_teacher(pareto_models(study_dir), fc.teacher,
                                                        data, cfg)
        log(f"teacher: {fc.teacher} (digital val accuracy {teacher_acc:.3f})")
    final_root = Path(out) if out is not None else study_dir / "final"
    models = [finalize_one(p, teacher, data, cfg, fc, final_root, log, teacher_acc)
              for p in paths]
    summary = {"study": cfg.name, "options": asked(fc), "ran": {
        "backend": fc.backend, "models": len(models),
        "processes": max((m["ran"]["processes"] for m in models), default=None)},
        "models": models, "provenance": provenance(cfg.train.device)}
    final_root.mkdir(parents=True, exist_ok=True)
    (final_root / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    return summary


def _timing(cfg: StudyConfig) -> dict[str, Any]:
    """The pruning record's latency settings: the spec it timed with, its rule left out."""
    spec = asdict(glue.measure_spec(cfg))
    return {k: v for k, v in spec.items() if k != "rule"}
