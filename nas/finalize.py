"""``hwnas finalize runs/<study>``: prune -> distill-train with DDP -> re-measure -> export.

For each of the top-K exported Pareto models (``runs/<study>/pareto/*/model.pt``):

1. **measure before**: static costs, digital accuracy, and accuracy under the study's hardware
   models and drift times with the study's protocol (``nas.scoring.glue.hw_accuracy``: repeats,
   compensation, HWA epochs);
2. **prune** (``compress.prune``) to a channel ratio, a MACs budget or a measured-latency budget;
3. **train** on the study's data (whole train split unless limited) with ``train.ddp``: in this
   process, under ``torchrun`` (``nproc`` > 1) or on Ray Train workers; with ``distill`` the loss
   is Hinton KD from the teacher (the most accurate Pareto model, or a given checkpoint);
4. for analog hardware, **HWA fine-tuning** (with distillation when asked), kept in the weights;
5. **measure after** with the same protocol; the latency of before and after is timed side by
   side, interleaved in one run on the study's latency settings and deployed form
   (``hw_cost.compare``), so both figures share the host's load; unsteady figures are flagged;
6. **export** like ``hwnas export`` into ``runs/<study>/final/<arch>/`` with a before/after table
   (units, spreads, warnings, and where an accuracy change comes from) in the model card; every
   model's figures also go to ``runs/<study>/final/summary.json`` for the study report, with
   what ran (``ran``: processes, pruned ratio, epochs, batch-norm and AdaBS images, programmings).

Between 4 and 5, after pruning or any training shorter than an epoch (or ``SETTLED_STEPS``
steps), the batch norms' statistics are **re-estimated** on training images
(``reestimate_bn``): the trained running statistics describe the unpruned model, or lag
weights that moved within fewer steps than their momentum averages over, and the digital score
would read them as they are (the analog score re-estimates its own through AdaBS). The
accuracy table labels its spreads as the Pareto tables do: ``± SE`` with the programmings or
images behind it.

The default teacher is the most accurate exported model on the validation images the
"before" figures use, measured now (the unpruned student is among the candidates), so it is
never weaker than its student.
"""

from __future__ import annotations

import copy
import json
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import yaml
from torch import nn

import analog
import hw_cost
from analog import defaults
from analog.adabs import recalibrate, training_images
from analog.precision import sampling_se
from hw_cost.compare import compare_latency
from hwnas.common.errors import ConfigError, Problem
from hwnas.common.provenance import provenance
from hwnas.compress.distill import DistillConfig, Distiller
from hwnas.compress.prune import PruneConfig, prune
from hwnas.train.data import DataSplits, load_data
from hwnas.train.ddp import DDPJob, Dist, FileStore, run_job, train
from hwnas.train.loop import evaluate
from hwnas.train.ray_train import fit_ray
from nas.results.export import arch_dirname, export_model, read_card
from nas.results.export_study import study_hw
from nas.scoring import glue
from nas.scoring.evaluate import Evaluator
from nas.study.config import StudyConfig, validate_study
from search_spaces.checkpoint import load_checkpoint, save_checkpoint

BACKENDS = ("torchrun", "ray")
# Before/after rows of the model card: (key, label, unit).
TABLE = (("params", "parameters", "count"), ("macs", "MACs per image", "count"),
         ("latency_ms", "latency (median)", "ms"),
         ("acc_digital", "accuracy, digital (val)", "fraction"),
         ("test_acc_digital", "accuracy, digital (test)", "fraction"))
# Training steps after which a batch norm's running average (torch's default momentum 0.1)
# keeps under 5% of what it held before: 0.9 ** 29 < 0.05.
SETTLED_STEPS = 29
# Suffixes of an accuracy key that are statistics of it, not metrics of their own.
ESTIMATE = ("_std", "_se", "_median", "_repeats", "_images")


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


def val_split(data: Any, cfg: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """The validation images every before/after accuracy (and the teacher choice) uses."""
    limit = cfg.hw_eval.eval_limit
    return data.x_val[:limit], data.y_val[:limit]


def pick_teacher(paths: list[Path], given: str | None, data: Any, cfg: Any
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


def measure(model: nn.Module, data: Any, cfg: Any, *, hwa: bool = True) -> dict[str, float]:
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


def side_by_side(before: nn.Module, after: nn.Module, data: Any, cfg: Any) -> dict[str, Any]:
    """Latency of ``before`` and ``after`` timed interleaved in one run (``hw_cost.compare``) on
    the study's latency settings and deployed form, for about twice a study's timing cap."""
    lat = cfg.latency
    return compare_latency({"before": before, "after": after}, data.input_shape,
                           device=lat.device, batch_size=lat.batch_size, dtype=lat.dtype,
                           form=glue.latency_form(cfg), threads=lat.threads,
                           seconds=max(2.0, 2 * lat.max_seconds, lat.min_seconds))


def _latency_figures(timing: dict[str, Any], name: str) -> dict[str, float]:
    t = timing["models"][name]
    return {"latency_ms": t["median_ms"], "latency_p10_ms": t["p10_ms"],
            "latency_p90_ms": t["p90_ms"], "latency_cv": t["cv"]}


def accuracy_source(before: dict[str, float], after: dict[str, float], cfg: Any,
                    fc: FinalizeConfig, data: Any, teacher: str | None) -> str:
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


def _load_data(cfg: Any, fc: FinalizeConfig) -> DataSplits:
    d = cfg.data
    return load_data(d.name, root=d.root, val_fraction=d.val_fraction, seed=d.seed,
                     train_limit=fc.train_limit, test_limit=d.test_limit)


def _latency_settings(cfg: StudyConfig) -> dict[str, Any]:
    lat = cfg.latency
    return {"device": lat.device, "batch_size": lat.batch_size, "dtype": lat.dtype,
            "threads": lat.threads, "max_seconds": lat.max_seconds, "min_seconds": lat.min_seconds}


def prune_measure(cfg: StudyConfig, input_shape: tuple[int, int, int], *, timed: bool
                  ) -> Callable[[nn.Module], dict[str, float]]:
    """What pruning re-measures after each step: params and MACs, and with ``timed`` the median
    latency on the study's latency settings (a latency budget holds where the study timed)."""

    def measure(model: nn.Module) -> dict[str, float]:
        static = hw_cost.static_costs(model, input_shape)
        out = {"params": float(static["params"]), "macs": float(static["macs"])}
        if timed:
            out["latency_ms"] = hw_cost.measure_latency(model, input_shape,
                                                        **_latency_settings(cfg)).median_ms
        return out

    return measure


def _prune(model: nn.Module, data: Any, cfg: Any, fc: FinalizeConfig,
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
        summary["config"] = {**asdict(pcfg), "latency": _latency_settings(cfg)}
    work.mkdir(parents=True, exist_ok=True)  # the student as a checkpoint: no pickled module
    save_checkpoint(work / "student.pt", space=meta["space"], arch=meta["arch"],
                    state_dict=model.state_dict(), data=meta["data"], module=model)
    (work / "prune.json").write_text(json.dumps(summary, indent=1))
    done.write_text(json.dumps(options))
    return summary


def _train(work: Path, teacher: nn.Module | None, cfg: Any, fc: FinalizeConfig
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


def _hwa(student: nn.Module, teacher: nn.Module | None, data: Any, cfg: Any,
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


def bn_images(cfg: StudyConfig, fc: FinalizeConfig) -> int:
    """Images that re-estimate the batch norms: ``fc.bn_images``, else the study's AdaBS count
    (the analog score's re-estimation), else the scoring default when the study turned it off."""
    if fc.bn_images is not None:
        return fc.bn_images
    return cfg.hw_eval.adabs or defaults.ADABS_IMAGES


def stale_bn(pruned: dict[str, Any], trained: dict[str, Any], hwa: dict[str, Any] | None
             ) -> list[str]:
    """Why the trained batch-norm statistics may not fit the final weights (empty: they do).
    Pruning changes every layer's inputs; under one epoch, or in fewer than ``SETTLED_STEPS``
    steps, the running averages still carry statistics of weights that have since moved (one
    epoch on 1,000 images is 7 steps of 128: measured on a quickstart model, digital accuracy
    0.18 on the trained statistics where the AdaBS-scored analog one read 0.43)."""
    why = []
    if pruned.get("target"):
        why.append(f"pruned ({pruned['target']})")
    steps = int(trained.get("steps") or 0)
    if float(trained.get("epochs", 1.0)) < 1:
        why.append(f"retrained {float(trained['epochs']):.2g} epoch (< 1)")
    elif 0 < steps < SETTLED_STEPS:
        why.append(f"retrained {steps} steps (< {SETTLED_STEPS})")
    if hwa is not None and float(hwa.get("epochs") or 0.0) < 1:
        why.append(f"HWA fine-tuned {float(hwa['epochs']):.2g} epoch (< 1)")
    return why


def reestimate_bn(model: nn.Module, data: Any, cfg: StudyConfig, images: int) -> int:
    """Re-estimate every batch norm's running statistics on ``images`` training images, drawn
    as AdaBS draws them (the study seed's ``adabs`` stream); the model is left in eval mode.
    Returns the number of batch norms re-estimated (0 without images or batch norms)."""
    x = training_images(data.x_train, min(images, len(data.x_train)), cfg.seed)
    if x is None:
        return 0
    return recalibrate(model.eval(), x, device=cfg.train.device)


def _bn_step(student: nn.Module, data: Any, cfg: StudyConfig, fc: FinalizeConfig,
             why: list[str]) -> dict[str, Any] | None:
    if not why:
        return None
    n = min(bn_images(cfg, fc), len(data.x_train))
    layers = reestimate_bn(student, data, cfg, n) if n else 0
    return {"images": n if layers else 0, "layers": layers, "why": why}


def bn_note(bn: dict[str, Any] | None) -> str:
    """What the table's "after" batch norms hold, in one line."""
    if bn is None:
        return "batch norms: the trained statistics (no pruning, at least one epoch of training)"
    if not bn["layers"]:
        return (f"batch norms NOT re-estimated ({', '.join(bn['why'])}): no batch norm or "
                "--bn-images 0; the digital score reads the trained statistics")
    return (f"batch norms re-estimated on {bn['images']} training images before every \"after\" "
            f"figure ({', '.join(bn['why'])}), as AdaBS does for the analog score")


def before_after(before: dict[str, float], after: dict[str, float]) -> list[dict[str, Any]]:
    """The before/after rows: costs, every accuracy with its SE, and the images each rests on."""
    accs = ["acc_digital", "test_acc_digital"] + sorted(
        k for k in after if k.startswith("acc_") and k != "acc_digital"
        and not k.endswith(ESTIMATE))
    specs = [*TABLE[:3], *(_accuracy_spec(k) for k in accs)]
    specs += [(f"{k}_images", f"images scored, {_accuracy_spec(k)[1][10:]}", "count")
              for k in accs]
    rows = []
    for k, label, unit in specs:
        if k in before and k in after:
            rows.append({"key": k, "label": label, "unit": unit, "before": before[k],
                         "after": after[k], "ratio": after[k] / before[k] if before[k] else None,
                         **_estimate(k, before, "before"), **_estimate(k, after, "after"),
                         **_spread(k, before, after)})
    return rows


def _accuracy_spec(key: str) -> tuple[str, str, str]:
    """``acc_pcm@1d`` -> its row: ``accuracy, pcm@1d (val)``, a fraction."""
    known = {k: (k, label, unit) for k, label, unit in TABLE}
    return known.get(key, (key, f"accuracy, {key.removeprefix('acc_')} (val)", "fraction"))


def _estimate(key: str, figures: dict[str, float], side: str) -> dict[str, Any]:
    """An accuracy's SE, the std over programmings, and what the SE rests on (programmings for
    analog hardware, images always), as the study stores them (``<key>_se`` ...)."""
    if f"{key}_se" not in figures:
        return {}
    return {f"{name}_{side}": figures.get(f"{key}_{suffix}") for name, suffix in (
        ("se", "se"), ("std", "std"), ("n", "repeats"), ("images", "images"))}


def _spread(key: str, before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
    """p10-p90 of a timed figure, and the ratio's own p10-p90 from the interleaved rounds."""
    if key != "latency_ms":
        return {}
    return {"p10_before": before.get("latency_p10_ms"), "p90_before": before.get("latency_p90_ms"),
            "p10_after": after.get("latency_p10_ms"), "p90_after": after.get("latency_p90_ms"),
            "ratio_p10": after.get("latency_ratio_p10"),
            "ratio_p90": after.get("latency_ratio_p90")}


def cell(r: dict[str, Any], side: str) -> str:
    """A figure with its spread named: ``± SE`` with what it rests on (programmings for analog
    accuracies, images for digital ones), ``[p10-p90]`` of timed calls; counts as integers."""
    v, se = r[side], r.get(f"se_{side}")
    text = (f"{v:,.0f}" if r.get("unit") == "count" else f"{v:.4g}") if isinstance(
        v, float) else str(v)
    if isinstance(se, float):
        n, images = r.get(f"n_{side}"), r.get(f"images_{side}")
        rests = f"{n:.0f} programmings" if n else f"{images:.0f} images"
        return f"{text} ± {se:.2g} (SE, {rests})"
    lo, hi = r.get(f"p10_{side}"), r.get(f"p90_{side}")
    return f"{text} [{lo:.4g}-{hi:.4g}]" if lo is not None and hi is not None else text


def ratio_cell(r: dict[str, Any]) -> str:
    if r["ratio"] is None:
        return ""
    lo, hi = r.get("ratio_p10"), r.get("ratio_p90")
    return f"x{r['ratio']:.3f}" + (f" [{lo:.3f}-{hi:.3f}]" if lo is not None else "")


LEGEND = ("Latency: before and after timed interleaved in one run; [p10-p90] of the calls, the "
          "ratio's [p10-p90] over the interleaved rounds. Accuracy: mean ± SE, the standard error "
          "as the Pareto tables give it: over the programmings for analog hardware (image "
          "sampling included), binomial over the images for digital; the std over programmings "
          "is in summary.json. Counts are counts.")


def table_markdown(rows: list[dict[str, Any]], notes: list[str] = ()) -> str:
    lines = ["## Before / after finalize", "", "| metric | unit | before | after | after/before |",
             "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['label']} | {r['unit']} | {cell(r, 'before')} | {cell(r, 'after')} | "
                     f"{ratio_cell(r)} |")
    lines += ["", LEGEND]
    lines += [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"


def finalize_one(path: Path, teacher: nn.Module | None, data: Any, cfg: Any, fc: FinalizeConfig,
                 final_root: Path, log: Any = print, teacher_acc: float | None = None
                 ) -> dict[str, Any]:
    """The whole recipe for one exported Pareto model; returns its summary row."""

    model, meta = load_checkpoint(path)
    name = arch_dirname(meta["arch"])
    work = final_root / "work" / name
    log(f"[{name}] measuring the exported model")
    before = measure(model, data, cfg)
    student = copy.deepcopy(model)
    pruned = _prune(student, data, cfg, fc, work, meta)
    student = load_checkpoint(work / "student.pt")[0]
    log(f"[{name}] pruned: {pruned.get('after') or 'not pruned'}; training {fc.epochs} epochs")
    trained = _train(work, teacher, cfg, fc)
    student.load_state_dict(torch.load(work / "train" / "final.pt", weights_only=True))
    hwa = _hwa(student, teacher, data, cfg, fc)
    bn = _bn_step(student, data, cfg, fc, stale_bn(pruned, trained, hwa))
    if bn is not None:
        log(f"[{name}] batch norms re-estimated on {bn['images']} training images "
            f"({bn['layers']} layers) before scoring: {', '.join(bn['why'])}")
    after = measure(student.eval(), data, cfg, hwa=hwa is None)
    log(f"[{name}] timing before and after side by side")
    timing = side_by_side(model, student, data, cfg)
    before.update(_latency_figures(timing, "before"))
    after.update(_latency_figures(timing, "after"),
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


def asked(fc: FinalizeConfig) -> dict[str, Any]:
    """The options as given, less those the chosen launch ignores (``workers`` is Ray's,
    ``nproc`` torchrun's): a record must not show a worker count that never ran."""
    unused = "nproc" if fc.backend == "ray" else "workers"
    return {k: v for k, v in asdict(fc).items() if k != unused}


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


def finalize(study_dir: str | Path, fc: FinalizeConfig, *, log: Any = print,
             out: str | Path | None = None) -> dict[str, Any]:
    """Finalize the top models of ``study_dir`` into ``out`` (default ``study_dir/final``);
    writes ``summary.json`` there and returns it."""
    study_dir = Path(study_dir)
    fc.validate()
    fc.prune_config()  # a bad prune target fails before any work
    cfg = study_config(study_dir)
    paths = pareto_models(study_dir)[: fc.top]
    data = _load_data(cfg, fc)
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
