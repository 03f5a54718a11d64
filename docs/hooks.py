"""MkDocs hooks: pages that are generated from the code at build time, never written by hand.

``<!-- hwnas:study-reference -->`` becomes the study-file reference, one table per section, from
the pydantic models in ``nas.study.config`` (a field without a description fails the build);
``<!-- hwnas:grammars -->`` becomes every registered space's arch-string grammar (its docstring);
``<!-- hwnas:registries -->`` lists the registered metrics, hardware models and data sets.
"""

from __future__ import annotations

import typing
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

# Fields whose meaning is their section's docstring or obvious from the name get one line here,
# so that every field of the reference has a description (a new field without one fails --strict).
_WHY = {
    "StudyConfig.schedule": "multi-objective successive halving or Hyperband "
                            "(docs/successive_halving.md); type none trains every candidate at "
                            "the full budget",
    "ScheduleCfg.type": "none, sh (asynchronous successive halving) or hyperband",
    "ScheduleCfg.eta": "promotion factor: the best 1/eta of a rung move up (> 1)",
    "ScheduleCfg.min_budget": "budget of the lowest rung, in units of resource",
    "ScheduleCfg.max_budget": "budget of the top rung (the study's full budget)",
    "ScheduleCfg.resource": "what a budget varies: epochs, images or steps",
    "ScheduleCfg.rung_se": "analog precision below the top rung: sqrt relaxes target_se by "
                           "sqrt(max_budget / budget), at most to 5 points, and shrinks "
                           "max_repeats alike; fixed keeps both",
    "TrainCfg.eval_batch_size": "images per batch when scoring (memory, not results)",
    "StudyConfig.evaluator": "train: proxy-train every candidate; supernet: inherit weights "
                             "from a weight-sharing supernet",
    "StudyConfig.supernet": "the supernet of evaluator: supernet (checkpoint, step-0 training, "
                            "BN recalibration, refine)",
    "SupernetCfg.refine_epochs": "epochs of standalone fine-tuning per refined front member",
    "StudyConfig.name": "study name: the run folder runs/<name> and the Optuna study name",
    "StudyConfig.description": "free text shown in the report",
    "StudyConfig.space": "a registered search space (`hwnas spaces list`)",
    "StudyConfig.seed": "seed of the sampler and of every trial's training and noise draws",
    "StudyConfig.n_trials": "complete trials wanted in total (earlier runs count)",
    "StudyConfig.data": "the data set candidates train and are scored on",
    "StudyConfig.objectives": "what to optimize: registered metrics with direction (at least one)",
    "StudyConfig.constraints": "budgets; a cost budget rejects a candidate before training",
    "StudyConfig.sampler": "the Optuna sampler (`default`, `tpe`, `nsga2`, `random`, ...); a "
                           "string is shorthand for {name: ...}",
    "StudyConfig.train": "proxy training of every candidate",
    "StudyConfig.hw_eval": "how accuracy under the hardware model is scored",
    "StudyConfig.latency": "how latency is measured",
    "StudyConfig.backend": "`optuna` (processes on RDB storage) or `ray` (Ray Tune, clusters)",
    "StudyConfig.workers": "Optuna worker processes on this machine",
    "StudyConfig.ray": "Ray Tune resources and retries (backend ray)",
    "StudyConfig.tabular": "look metrics up in a table instead of training (see Tabular mode)",
    "StudyConfig.pareto": "how the front is scored",
    "StudyConfig.export": "what `hwnas export` writes",
    "StudyConfig.tracking": "MLflow / TensorBoard logging (the tracking extra)",
    "DataCfg.name": "a registered data set (`hwnas data list`)",
    "DataCfg.root": "folder of the data files (default: the data set's own)",
    "DataCfg.val_fraction": "share of the training split held out for validation",
    "DataCfg.test_limit": "test images used",
    "DataCfg.seed": "seed of the train/validation split",
    "ObjectiveCfg.metric": "a registered metric (accuracy, latency, macs, params, energy, ...)",
    "ObjectiveCfg.direction": "minimize | maximize; must match the metric's own",
    "ObjectiveCfg.hw": "hardware model for accuracy (`hwnas analog list`; default digital)",
    "ObjectiveCfg.time": "drift time for analog accuracy, e.g. 1h, 1d, 30d",
    "ConstraintCfg.metric": "a registered metric",
    "ConstraintCfg.max": "upper bound (in the metric's unit)",
    "ConstraintCfg.min": "lower bound",
    "ConstraintCfg.hw": "hardware model, for accuracy budgets",
    "ConstraintCfg.time": "drift time, for analog accuracy budgets",
    "SamplerCfg.name": "a registered sampler",
    "SamplerCfg.options": "keyword arguments of the Optuna sampler",
    "TrainCfg.epochs": "training epochs per candidate (fractions allowed)",
    "TrainCfg.steps": "optimizer steps instead of epochs",
    "TrainCfg.batch_size": "training batch size",
    "TrainCfg.lr": "peak learning rate (default: the optimizer's)",
    "TrainCfg.optimizer": "sgd | adamw",
    "TrainCfg.weight_decay": "weight decay (default: the optimizer's)",
    "TrainCfg.momentum": "SGD momentum",
    "TrainCfg.label_smoothing": "label smoothing of the cross-entropy",
    "TrainCfg.warmup_epochs": "linear warm-up before the cosine decay",
    "TrainCfg.augment": "random crop and flip where the data set allows",
    "TrainCfg.device": "cpu | cuda | cuda:N",
    "TrainCfg.amp": "mixed precision on CUDA",
    "TrainCfg.channels_last": "channels-last memory format on CUDA",
    "HwEvalCfg.compensation": "global drift compensation (aihwkit)",
    "HwEvalCfg.fast": "the fast analog path (agrees with aihwkit tiles, several times faster)",
    "LatencyCfg.device": "device the latency is measured on",
    "LatencyCfg.batch_size": "batch size of the timed forward pass",
    "LatencyCfg.dtype": "fp32 | fp16 | bf16",
    "LatencyCfg.max_seconds": "stop timing after this long",
    "RayCfg.address": "Ray cluster address (default: start a local Ray)",
    "RayCfg.cpus_per_trial": "CPUs reserved per trial",
    "RayCfg.gpus_per_trial": "GPUs per trial; fractions share a device",
    "RayCfg.max_concurrent": "trials at once",
    "TabularCfg.path": "CSV or Parquet table; relative paths are tried from the study file's "
                       "folder, then the working directory",
    "TabularCfg.key": "the column holding the space's arch strings",
    "TabularCfg.columns": "{metric key: column} for columns not named by metric key",
    "ExportCfg.onnx": "also export ONNX and check it against PyTorch",
    "ExportCfg.onnx_tolerance": "largest allowed ONNX/PyTorch output difference",
}


def _type(annotation: Any) -> str:
    text = getattr(annotation, "__name__", None) if isinstance(annotation, type) else None
    text = text or str(annotation).replace("typing.", "")
    text = text.replace("NoneType", "None").replace("nas.study.config.", "")
    return text.replace("|", "&#124;").replace("<", "&lt;")


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    if field.default_factory is not None:
        value = field.default_factory()
        return "see below" if isinstance(value, BaseModel) else f"`{value!r}`"
    return f"`{field.default!r}`"


def _models(model: type[BaseModel]) -> list[type[BaseModel]]:
    """``model`` and the nested section models, in field order."""
    out = [model]
    for field in model.model_fields.values():
        for arg in (field.annotation, *typing.get_args(field.annotation)):
            for sub in (arg, *typing.get_args(arg)):
                if (isinstance(sub, type) and issubclass(sub, BaseModel) and sub not in out
                        and sub is not model):
                    out += _models(sub)
    return list(dict.fromkeys(out))


def _section(model: type[BaseModel], prefix: str) -> str:
    from nas.study.config import StudyConfig

    head = "## The study file" if model is StudyConfig else f"## `{prefix}`"
    rows = ["| field | type | default | meaning |", "|---|---|---|---|"]
    for name, field in model.model_fields.items():
        why = field.description or _WHY.get(f"{model.__name__}.{name}")
        if not why:
            raise ValueError(f"{model.__name__}.{name} has no description: add one to the "
                             "Field or to docs/hooks.py _WHY")
        why = why.replace("<", "&lt;").replace("|", "&#124;")
        rows.append(f"| `{name}` | {_type(field.annotation)} | {_default(field)} | {why} |")
    doc = (model.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
    return "\n".join([head, "", doc, "", *rows, ""])


def study_reference() -> str:
    from nas.study.config import StudyConfig

    where = {StudyConfig: ""}
    for name, field in StudyConfig.model_fields.items():
        for sub in _models(StudyConfig)[1:]:
            if sub in (field.annotation, *typing.get_args(field.annotation)) or any(
                    sub in typing.get_args(a) for a in typing.get_args(field.annotation)):
                where.setdefault(sub, name)
    return "\n".join(_section(m, where.get(m, m.__name__)) for m in _models(StudyConfig))


def grammars() -> str:
    from search_spaces import get_space, list_spaces

    parts = []
    for name in list_spaces():
        space = get_space(name)
        parts += [f"## `{name}`", "", f"{space.size():,} architectures. Example: "
                  f"`{space.example}`", "", "```text", space.grammar(), "```", ""]
    return "\n".join(parts)


def registries() -> str:
    from analog import list_hw
    from hwnas.train.data import list_datasets
    from nas.study.objectives import METRICS

    rows = ["| metric | key | direction | unit | meaning |", "|---|---|---|---|---|"]
    for name in METRICS.list():
        m = METRICS.get(name)
        rows.append(f"| `{name}` | `{m.column}` | {m.direction} | {m.unit} | {m.help} |")
    return "\n".join([*rows, "", "Hardware models: " + ", ".join(f"`{h}`" for h in list_hw())
                      + " (and any `fqN` / `wXaY`).", "",
                      "Data sets: " + ", ".join(f"`{d}`" for d in list_datasets()) + ".", ""])


_BLOCKS = {"<!-- hwnas:study-reference -->": study_reference,
           "<!-- hwnas:grammars -->": grammars, "<!-- hwnas:registries -->": registries}


def on_page_markdown(markdown: str, **_: Any) -> str:
    for marker, make in _BLOCKS.items():
        if marker in markdown:
            markdown = markdown.replace(marker, make())
    return markdown
