"""Study files: typed configuration, validated before the first trial, every problem at once.

A study file is YAML (``studies/<name>.yaml``). ``validate_study(raw)`` turns it into a
``StudyConfig``; pydantic checks types and ranges, then the names are checked against the
registries (spaces, data sets, hardware models, metrics, samplers). All problems of both kinds
are raised together in one ``ConfigError``, each with its rule, the value received and the fix.
Reading study files, ``--set`` overrides and saving the resolved config live in
``nas.study.files``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

from hwnas.common.errors import ConfigError, Problem
from hwnas.common.plugins import load_entry_points, load_plugins
from hwnas.train.fit_config import FitConfig, Validation, settings
from nas.study.checks import (
    hw_options_problems,
    pydantic_problems,
    registry_problems,
    resolve_path,
)
from nas.study.hardware import HardwareSpace, hardware_problems, parse_hardware
from nas.study.mapping import MappingCfg, mapping_problems, parse_mapping
from nas.study.objectives import METRICS, Budget, Objective, time_label
from nas.study.schedule import ScheduleCfg, schedule_problems
from search_spaces import SearchSpace, get_space
from search_spaces.pool import read_pool

AUTO_HWA_EPOCHS = 0.5  # `hw_eval.hwa: auto`: a short fine-tune, as AnalogNAS scores candidates


class _Cfg(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DataCfg(_Cfg):
    """Which data set the candidates train and are scored on (``hwnas.train.data.load_data``)."""

    name: str = Field("fashion_mnist", description="a registered data set (`hwnas data list`)")
    root: str | None = Field(None, description=(
        "folder of the data files (default: the data set's own)"))
    val_fraction: float = Field(0.1, gt=0, lt=1, description="share of the data set's train "
                                "images held out for validation (candidates are scored there)")
    train_limit: int | None = Field(None, gt=0, description="train images used (proxy budget); "
                                    "never shrinks the validation split")
    test_limit: int | None = Field(None, gt=0, description="test images used")
    seed: int = Field(0, description="seed of the train/validation split")
    options: dict[str, Any] = Field(default_factory=dict, description=(
        "the reader's own options, e.g. {img_size: 64, channels: 1} for imagefolder "
        "(`hwnas data info NAME` reads the same as --data-option KEY=VALUE)"))


class ObjectiveCfg(_Cfg):
    """One objective: a registered metric; accuracy also names its hardware model and drift time."""

    metric: str = Field(description=(
        "a registered metric (accuracy, latency, macs, params, energy, ...)"))
    direction: Literal["minimize", "maximize"] | None = Field(None, description=(
        "minimize | maximize; must match the metric's own"))
    hw: str | None = Field(None, description=(
        "hardware model for accuracy (`hwnas analog list`; default digital)"))
    time: str | float | None = Field(None, description=(
        "drift time for analog accuracy, e.g. 1h, 1d, 30d"))


class ConstraintCfg(_Cfg):
    """A budget ``min <= metric <= max``; cost metrics are checked before any training."""

    metric: str = Field(description="a registered metric")
    max: float | None = Field(None, description="upper bound (in the metric's unit)")
    min: float | None = Field(None, description="lower bound")
    hw: str | None = Field(None, description="hardware model, for accuracy budgets")
    time: str | float | None = Field(None, description="drift time, for analog accuracy budgets")


class SamplerCfg(_Cfg):
    name: str = Field("default", description="a registered sampler")
    options: dict[str, Any] = Field(default_factory=dict, description=(
        "keyword arguments of the Optuna sampler"))


def fit_model(fit: type = FitConfig, exclude: tuple[str, ...] = ("seed",)) -> type[_Cfg]:
    """A pydantic model of ``fit``'s fields (``hwnas.train.fit_config.setting``): the same
    types, defaults, bounds and descriptions, less ``exclude``. Study-only fields and defaults
    are added by subclassing it."""
    defs = {s.name: (s.type, Field(s.default, description=s.description, **s.bounds))
            for s in settings(fit) if s.name not in exclude}
    return create_model(f"{fit.__name__}Fields", __base__=_Cfg, **defs)


class TrainCfg(fit_model(FitConfig)):
    """Proxy training per trial: the fields of ``hwnas.train.FitConfig``, declared there once
    with their defaults, bounds and descriptions (the seed is the study's)."""

    validation: Validation = Field(
        "off", description="val-split passes while training: off (the default here: the study "
        "scores every candidate itself after training, on hw_eval.eval_limit images), end, or "
        "epoch (FitConfig's default)")
    threads: int | None = Field(1, gt=0, description="torch CPU threads while training and "
                                "scoring a candidate: fixed, so a result never depends on the "
                                "worker count (float sums differ between thread counts)")


class HwEvalCfg(_Cfg):
    """How accuracy under a hardware model is scored: every analog accuracy is an estimate with
    its spread, standard error, programmings and images (``analog.precision`` states the rule)."""

    repeats: int = Field(3, gt=0, description="programming-noise draws per drift time (the "
                         "minimum when target_se is set)")
    target_se: float | None = Field(0.02, gt=0, lt=1, description="target standard error of "
                                    "each analog accuracy (a fraction; 0.02 = 2 points): "
                                    "programmings and images grow until every drift time meets "
                                    "it or a cap is reached; null: exactly `repeats`")
    max_repeats: int = Field(10, gt=0, description="cap on programmings per candidate")
    eval_limit: int | None = Field(2000, gt=0, description="cap on validation images scored")
    adabs: int = Field(256, ge=0, description="AdaBS: training images that re-estimate the "
                       "batch norms through the analog model after programming and each drift "
                       "(analog models only; 0 = off)")
    hwa: float | str = Field(
        "off", description="hardware-aware fine-tuning before analog scoring: off, epochs, or "
        f"auto (= {AUTO_HWA_EPOCHS} epochs, for analog hardware models only)")
    hwa_recipe: Literal["plain", "rasch2023"] = Field(
        "plain", description="HWA recipe (analog.hwa_recipe): plain, or rasch2023 (noise ramp, "
        "distillation from the noise-free model, 3x the epochs)")
    hwa_engine: Literal["auto", "torch", "aihwkit", "lightning"] = Field(
        "auto", description="HWA engine: auto, torch (pcm_static/pcm_hwa on the fast path's "
        "tiles), aihwkit (C++ tiles) or lightning")
    compensation: bool = Field(True, description="global drift compensation (aihwkit)")
    fast: bool = Field(True, description=(
        "the fast analog path (agrees with aihwkit tiles, several times faster)"))
    mapping: dict[str, Any] = Field(
        default_factory=dict, description="layer-wise analog/digital mapping, fixed or searched "
        "(nas.study.mapping): e.g. {search: [first_k_digital, last_k_digital], max_k: 2}")
    options: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="fixed parameters per analog hardware model, e.g. "
        "{pcm: {adc_bits: 8, tile_size: 256}} (analog.aimc.AnalogOptions): the accuracy model "
        "and the analog cost estimate both use them, and every trial records them")

    hardware: dict[str, Any] = Field(
        default_factory=dict, description="hardware searched with the arch (nas.study.hardware):"
        " e.g. {adc_bits: [6, 8], read_mode: [one_phase, four_phase], digital: [none, "
        "first_last], device: [pcm_static, pcm_hermes]}; one value fixes a dimension")

    @field_validator("mapping")
    @classmethod
    def _mapping(cls, v: dict[str, Any]) -> dict[str, Any]:
        parse_mapping(v)  # a ConfigError (a ValueError) names every bad key at once
        return v

    @field_validator("hardware")
    @classmethod
    def _hardware(cls, v: dict[str, Any]) -> dict[str, Any]:
        parse_hardware(v)
        return v

    @property
    def hardware_space(self) -> HardwareSpace:
        return parse_hardware(self.hardware)

    @property
    def mapping_cfg(self) -> MappingCfg:
        return dataclasses.replace(parse_mapping(self.mapping), hardware=self.hardware_space)

    @model_validator(mode="before")
    @classmethod
    def _old_hwa_epochs(cls, raw: Any) -> Any:
        """``hwa_epochs: x`` (earlier study files) means ``hwa: x``."""
        if isinstance(raw, dict) and "hwa_epochs" in raw and "hwa" not in raw:
            raw = {**raw, "hwa": raw["hwa_epochs"] or "off"}
            raw.pop("hwa_epochs")
        return raw

    @field_validator("hwa", mode="before")
    @classmethod
    def _hwa_value(cls, v: Any) -> float | str:
        if v in ("off", "auto"):
            return v
        if isinstance(v, int | float) and not isinstance(v, bool) and v >= 0:
            return float(v)
        raise ValueError("must be off, auto or a number of epochs >= 0")

    @property
    def hwa_epochs(self) -> float:
        """HWA epochs for analog hardware models (0: none)."""
        if self.hwa == "off":
            return 0.0
        return AUTO_HWA_EPOCHS if self.hwa == "auto" else float(self.hwa)


class LatencyCfg(_Cfg):
    """How latency is measured (``hw_cost.cost_of``)."""

    device: str = Field("cpu", description="device the latency is measured on: a latency "
                        "backend (cpu, cuda, cuda:N, or a plugin's, docs/plugins.md)")
    batch_size: int = Field(1, gt=0, description="batch size of the timed forward pass")
    dtype: Literal["fp32", "fp16", "bf16"] = Field("fp32", description="fp32 | fp16 | bf16")
    threads: int | None = Field(1, gt=0, description="CPU threads while timing (fixed)")
    max_seconds: float = Field(2.0, gt=0, description="stop timing after this long")
    min_seconds: float = Field(0.0, ge=0, description="time at least this long: averages a "
                               "shared host's speed drift (hw_cost.StopRule)")
    warmup_seconds: float = Field(0.3, ge=0, description="untimed calls before timing (a GPU "
                                  "ramps its clocks)")
    cache: str | None = Field(None, description="cost cache path (default: hw_cost's)")
    form: Literal["eager", "compile", "int8", "fp16", "bf16"] | None = Field(
        None, description="deployed form timed (hw_cost.forms); default: the form the "
        "objectives' hardware model implies (int8 -> int8, else eager)")

    @model_validator(mode="after")
    def _timing_window(self) -> LatencyCfg:
        if self.min_seconds > self.max_seconds:
            raise ConfigError.one("latency.min_seconds", "must not exceed latency.max_seconds",
                                  f"min_seconds={self.min_seconds}, "
                                  f"max_seconds={self.max_seconds}",
                                  f"raise max_seconds to at least {self.min_seconds} or lower "
                                  "min_seconds")
        return self

    @model_validator(mode="after")
    def _form_on_device(self) -> LatencyCfg:
        # The latency backend says which forms it runs (hw_cost.backends); an unknown device
        # is reported with the list of backends.
        from hw_cost.backends import get_backend

        backend = get_backend(self.device)  # an unknown name lists the known backends
        problem = backend.unsupported_form(self.form) if self.form else None
        if problem:
            raise ValueError(f"latency.form {problem.rule}; got {problem.value} "
                             f"(device {self.device!r}): {problem.fix}")
        return self


class RayCfg(_Cfg):
    address: str | None = Field(None, description=(
        "Ray cluster address (default: start a local Ray)"))
    cpus_per_trial: float = Field(1.0, gt=0, description="CPUs reserved per trial")
    gpus_per_trial: float = Field(0.0, ge=0, description="GPUs per trial; fractions share a device")
    max_concurrent: int | None = Field(None, gt=0, description="trials at once")
    max_failures: int = Field(1, ge=0, description="retries of a trial whose worker died")
    storage: str | None = Field(None, description="Ray Tune's storage: a path on a file system "
                                "every node shares, or a URI (file://, s3://, gs://); default: "
                                "runs/<study>/ray on the driver")


class TabularCfg(_Cfg):
    """Look metrics up in a table instead of training and measuring."""

    path: str = Field(description=(
        "CSV or Parquet table; relative paths are tried from the study file's folder, then the "
        "working directory"))
    key: str = Field("arch", description="the column holding the space's arch strings")
    columns: dict[str, str] = Field(default_factory=dict, description=(
        "{metric key: column} for columns not named by metric key"))


class ParetoCfg(_Cfg):
    """How the front is scored: the hypervolume's reference point."""

    reference: dict[str, float] = Field(default_factory=dict, description=(
        "hypervolume reference point, {objective key: value} (keys such as acc_pcm@1d, "
        "latency_ms). Objectives left out take, in order: the metric's natural worst value "
        "(accuracy 0), the bound of a budget on the same metric (constraints), else the worst "
        "value of this run's feasible trials plus 10% of their range, which moves between runs: "
        "set it to compare hypervolumes across runs. The printed hypervolume states the point. "
        "The default sampler weighs its mutations' parents against the fixed part of it."))
    train_noise: dict[str, float] = Field(default_factory=dict, description=(
        "training-seed noise of each noisy objective, {objective key: SD} (e.g. acc_pcm@1d: "
        "0.012): added in quadrature to the stored SE when the front decides which members it "
        "can tell apart, since one score comes from one training run. `python -m bench.fidelity "
        "report` measures it per recipe from seed gaps."))
    shrink: Literal["off", "prior"] = Field("off", description=(
        "prior: the front is picked on each trained accuracy pulled toward the line of the "
        "trained candidates' accuracies on the log of their free rung-0 score "
        "(schedule.prior: synflow or params), by the share of its stored SE in their spread "
        "(nas.algorithms.shrink). The measured values stay in the study and beside the shrunk "
        "ones in the report. off: the front is the Pareto set of the measured values."))


def pareto_problems(cfg: StudyConfig) -> list[Problem]:
    """Broken rules of the ``pareto`` section of a validated study config."""
    prior = cfg.schedule.prior
    if cfg.pareto.shrink == "prior" and prior not in SHRINK_PRIORS:
        return [Problem("pareto.shrink", "pulls trained accuracies toward their trend on the log "
                        f"of a positive rung-0 prior ({' or '.join(SHRINK_PRIORS)}), and "
                        f"schedule.prior is {prior!r}", cfg.pareto.shrink,
                        "set schedule.prior: synflow (with schedule.type: sh), or "
                        "pareto.shrink: off (--set pareto.shrink=off)")]
    return []


SHRINK_PRIORS = ("synflow", "params")  # positive scores: their log is defined


class ExportCfg(_Cfg):
    top: int | None = Field(None, gt=0, description="export at most this many Pareto models")
    onnx: bool = Field(True, description="also export ONNX and check it against PyTorch")
    onnx_tolerance: float = Field(1e-4, gt=0, description=(
        "largest allowed ONNX/PyTorch output difference"))


class TrackingCfg(_Cfg):
    """Where finished trials are logged besides the study storage (the ``tracking`` extra)."""

    mlflow_uri: str | None = Field(None, description=(
        "MLflow tracking URI: a folder (a local file store, e.g. runs/mlruns) or a server URL; "
        "one MLflow run per trial in an experiment named after the study"))
    tensorboard: str | None = Field(None, description=(
        "folder for TensorBoard event files, one sub-folder per trial (HParams tab)"))


class SupernetCfg(_Cfg):
    """Weight-sharing evaluation (``evaluator: supernet``): candidates inherit their weights."""

    checkpoint: str | None = Field(None, description="supernet file; default "
                                   "runs/<study>/supernet.pt, trained as step 0 when missing")
    train: dict[str, Any] = Field(default_factory=dict, description="SupernetTrainConfig fields "
                                  "for step 0 (steps, batch_size, k, lr, hwa_noise, ...)")
    bn_images: int = Field(500, gt=0, description="train images that re-estimate each "
                           "candidate's BatchNorm statistics")
    finetune_steps: int = Field(0, ge=0, description="optimizer steps (the study's `train` "
                                "settings) each candidate trains from its inherited weights "
                                "before it is scored; with `schedule.resource: steps` each "
                                "rung's budget takes its place")
    refine_top: int = Field(3, ge=0, description="front members fine-tuned standalone by "
                            "`hwnas supernet refine`")
    refine_epochs: float = Field(1.0, gt=0, description=(
        "epochs of standalone fine-tuning per refined front member"))


class StudyConfig(_Cfg):
    """A whole study. Every field has a default except ``name``, ``space`` and ``objectives``."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$", description=(
        "study name: the run folder runs/<name> and the Optuna study name"))
    description: str = Field("", description="free text shown in the report")
    space: str = Field(description="a registered search space (`hwnas spaces list`)")
    space_pool: str | None = Field(None, description=(
        "a text file of the space's archs, one per line: the study searches those only (e.g. "
        "a truth set, to score the front it returns against known accuracies)"))
    seed: int = Field(0, description=(
        "seed of the sampler and of every trial's training and noise draws"))
    n_trials: int = Field(20, gt=0, description=(
        "complete trials wanted in total (earlier runs count)"))
    timeout: float | None = Field(None, gt=0, description="seconds for this run")
    data: DataCfg = Field(default_factory=DataCfg, description=(
        "the data set candidates train and are scored on"))
    objectives: list[ObjectiveCfg] = Field(min_length=1, description=(
        "what to optimize: registered metrics with direction (at least one)"))
    constraints: list[ConstraintCfg] = Field(default_factory=list, description=(
        "budgets; a cost budget rejects a candidate before training"))
    sampler: SamplerCfg = Field(default_factory=SamplerCfg, description=(
        "the Optuna sampler (`default`, `tpe`, `nsga2`, `random`, ...); a string is shorthand for "
        "{name: ...}"))
    schedule: ScheduleCfg = Field(default_factory=ScheduleCfg, description=(
        "multi-objective successive halving or Hyperband (docs/successive_halving.md); type none "
        "trains every candidate at the full budget"))
    train: TrainCfg = Field(default_factory=TrainCfg, description=(
        "proxy training of every candidate"))
    hw_eval: HwEvalCfg = Field(default_factory=HwEvalCfg, description=(
        "how accuracy under the hardware model is scored"))
    latency: LatencyCfg = Field(default_factory=LatencyCfg, description="how latency is measured")
    storage: str | None = Field(None, description="RDB URL; default sqlite runs/<name>/study.db")
    backend: Literal["optuna", "ray"] = Field("optuna", description=(
        "`optuna` (processes on RDB storage) or `ray` (Ray Tune, clusters)"))
    workers: int = Field(1, gt=0, description="Optuna worker processes on this machine")
    ray: RayCfg = Field(default_factory=RayCfg, description=(
        "Ray Tune resources and retries (backend ray)"))
    tabular: TabularCfg | None = Field(None, description=(
        "look metrics up in a table instead of training (see Tabular mode)"))
    evaluator: Literal["train", "supernet"] = Field("train", description=(
        "train: proxy-train every candidate; supernet: inherit weights from a weight-sharing "
        "supernet"))
    supernet: SupernetCfg = Field(default_factory=SupernetCfg, description=(
        "the supernet of evaluator: supernet (checkpoint, step-0 training, BN recalibration, "
        "refine)"))
    pareto: ParetoCfg = Field(default_factory=ParetoCfg, description="how the front is scored")
    export: ExportCfg = Field(default_factory=ExportCfg, description="what `hwnas export` writes")
    heartbeat_s: int = Field(10, gt=0, description="worker heartbeat; stale after 3x")
    max_failed: int | None = Field(None, gt=0, description="stop a run after this many failures")
    tracking: TrackingCfg = Field(default_factory=TrackingCfg, description=(
        "MLflow / TensorBoard logging (the tracking extra)"))
    plugins: list[str] = Field(default_factory=list, description=(
        "modules or .py files to import before validation, in every process (they register "
        "spaces, hardware models, data sets, metrics); a relative path is taken from the "
        "study file's folder"))

    @field_validator("sampler", mode="before")
    @classmethod
    def _sampler_shorthand(cls, v: Any) -> Any:
        return {"name": v} if isinstance(v, str) else v

    # -- resolved views ---------------------------------------------------------------------
    def objectives_resolved(self) -> list[Objective]:
        out = []
        for o in self.objectives:
            m = METRICS.get(o.metric)
            hw = (o.hw or "digital") if m.uses_hw else None
            out.append(Objective(m, o.direction or m.direction, hw, time_label(o.time)))
        return out

    def budgets(self) -> list[Budget]:
        out = []
        for c in self.constraints:
            m = METRICS.get(c.metric)
            hw = (c.hw or "digital") if m.uses_hw else None
            out.append(Budget(m, max=c.max, min=c.min, hw=hw, time=time_label(c.time)))
        return out

    def budget_bound(self, key: str, direction: str) -> float | None:
        """The bound a budget on objective ``key`` sets on the worst side (None: no such)."""
        for b in self.budgets():
            bound = (b.max if direction == "minimize" else b.min) if b.key == key else None
            if bound is not None:
                return bound
        return None

    def fixed_reference(self) -> list[float | None]:
        """The hypervolume reference fixed before any trial, one value per objective in order:
        ``pareto.reference``, else the metric's natural worst (accuracy 0), else a budget's
        bound; None where only the run's own values can set it (``nas.results.summary``)."""
        out: list[float | None] = []
        for o in self.objectives_resolved():
            given = self.pareto.reference.get(o.key)
            natural = o.metric.worst
            out.append(given if given is not None else
                       natural if natural is not None else self.budget_bound(o.key, o.direction))
        return out

    def search_space(self) -> SearchSpace:
        """The space this study searches: ``space``, or only the archs of ``space_pool``."""
        base = get_space(self.space)
        return read_pool(base, resolve_path(self.space_pool)) if self.space_pool else base

    def storage_url(self, study_dir: Path) -> str:
        return self.storage or f"sqlite:///{(study_dir / 'study.db').resolve()}"

    def dump(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def validate_study(raw: dict[str, Any]) -> StudyConfig:
    """A typed ``StudyConfig``, or one ``ConfigError`` listing every problem found."""
    if not isinstance(raw, dict):
        raise ConfigError.one("study", "must be a mapping of keys to values", type(raw).__name__,
                              "write the study as YAML keys (see studies/quickstart.yaml)")
    _load_plugins(raw.get("plugins"))
    problems = []
    cfg = None
    try:
        cfg = StudyConfig.model_validate(raw)
    except ValidationError as err:
        problems += pydantic_problems(err, StudyConfig)
    problems += registry_problems(raw, cfg)
    if cfg is not None:
        problems += (schedule_problems(cfg) + mapping_problems(cfg) + hw_options_problems(cfg)
                     + hardware_problems(cfg) + pareto_problems(cfg))
    if problems:
        raise ConfigError(problems)
    assert cfg is not None
    return cfg


def _load_plugins(items: Any) -> None:
    """Import the study's plugins before any name is checked (a wrong type is reported later)."""
    if isinstance(items, list) and all(isinstance(i, str) for i in items):
        load_plugins(items)
    else:
        load_entry_points()
