"""The checks behind ``validate_study``: pydantic errors as ``Problem``s, and registry look-ups.

Registry checks run on the raw mapping (not the typed config) so that a file with a type error
*and* an unknown space name reports both in one go.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from pydantic import BaseModel, ValidationError
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

import analog
from hwnas.common.devices import device_problem, is_cuda
from hwnas.common.errors import ConfigError, Problem
from hwnas.resources import shipped
from hwnas.train.data import list_datasets
from nas.algorithms.samplers import SAMPLERS, option_names, option_problems
from nas.study.objectives import METRICS, time_label
from nas.study.table import TabularEvaluator
from search_spaces import get_space, list_spaces
from search_spaces.pool import read_pool

if TYPE_CHECKING:
    from nas.study.config import StudyConfig

# Each tracking field and the packages (the ``tracking`` extra) it needs.
TRACKING_PACKAGES = {"mlflow_uri": ("mlflow",),
                     "tensorboard": ("tensorboardX",)}

REPO = Path(__file__).resolve().parents[2]


# -- pydantic ---------------------------------------------------------------------------------
def _where(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "study"


def _fields_at(model: type[BaseModel], loc: tuple) -> list[str]:
    """Field names allowed at ``loc`` (walks nested models), for 'unknown key' fixes."""
    for part in loc:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part)
        if field is None:
            break
        sub = _model_of(field.annotation)
        if sub is None:
            break
        model = sub
    return sorted(model.model_fields)


def _model_of(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _model_of(arg)
        if found is not None:
            return found
    return None


def _fix(err: dict, model: type[BaseModel]) -> str:
    kind = err["type"]
    if kind == "extra_forbidden":
        return f"remove it or fix its spelling; allowed here: {_fields_at(model, err['loc'][:-1])}"
    if kind == "missing":
        return "add it"
    if kind in ("literal_error", "enum"):
        return "use one of the values listed in the rule"
    if kind.startswith(("greater", "less")):
        return "change the value to satisfy the bound"
    if kind == "string_pattern_mismatch":
        return "use letters, digits, '_', '-' or '.' only"
    if kind == "too_short":
        return "give at least one entry"
    return "write a value of the expected type"


def pydantic_problems(err: ValidationError, model: type[BaseModel]) -> list[Problem]:
    """Each pydantic error as a ``Problem``; a validator that raised ``ConfigError`` (a model's
    cross-field rule, e.g. ``LatencyCfg``'s timing window) keeps its own where, rule and fix."""
    out = []
    for e in err.errors():
        raised = (e.get("ctx") or {}).get("error")
        if isinstance(raised, ConfigError):
            out += raised.problems
            continue
        value = e.get("input")
        if isinstance(value, dict) and e["type"] == "missing":
            value = "(absent)"
        out.append(Problem(_where(e["loc"]), e["msg"], value, _fix(e, model)))
    return out


# -- registries -------------------------------------------------------------------------------
# Not cached: a plugin imported later (study file, entry point) adds names.
def _spaces() -> list[str]:
    return list_spaces()


def _datasets() -> list[str]:
    return list_datasets()


def _first_problem(where: str, value: Any, check: Callable[[Any], object]) -> Problem | None:
    """None when ``check(value)`` accepts it; else its first problem, placed at ``where``."""
    try:
        check(value)
        return None
    except ConfigError as err:
        p = err.problems[0]
        return Problem(where, p.rule, value, p.fix)


def hw_problem(where: str, name: str) -> Problem | None:
    """None when ``name`` is a hardware model ``analog.apply`` accepts (incl. generic fqN)."""
    return _first_problem(where, name, analog.get_hw)


def hw_options_problems(cfg: StudyConfig) -> list[Problem]:
    """``hw_eval.options``: each key an analog hardware model the study scores, each value
    ``analog.aimc.AnalogOptions`` that the model can build with."""
    scored = {item.hw for item in [*cfg.objectives, *cfg.constraints] if item.hw}
    out = []
    for name, opts in cfg.hw_eval.options.items():
        where = f"hw_eval.options.{name}"
        if name not in scored:
            out.append(Problem(where, "must name a hardware model an objective or constraint "
                               f"scores ({sorted(scored) or 'none'})", name,
                               "fix the name or drop the entry"))
        elif hw_problem(where, name) is not None:
            continue  # an unknown model: the objective's own check reports it
        elif analog.get_hw(name).kind != "analog":
            out.append(Problem(where, "options apply to analog hardware models only", name,
                               "drop the entry (`hwnas analog list` shows the analog models)"))
        else:
            try:
                analog.get_hw(name).describe(**opts)
            except ConfigError as err:
                out += [Problem(where, p.rule, p.value, p.fix) for p in err.problems]
    return out


def time_problem(where: str, time: Any) -> Problem | None:
    return _first_problem(where, time, analog.parse_time)


def resolve_path(path: str | Path) -> Path:
    """A relative data path is tried from the working directory, then as a shipped file."""
    p = Path(path)
    if p.is_absolute() or p.exists():
        return p
    return shipped(p) or p  # the installed package's copy, else the checkout's


def _str(v: Any) -> bool:
    return isinstance(v, str)


def _metric_problems(where: str, item: Any) -> list[Problem]:
    if not isinstance(item, dict) or not _str(item.get("metric")):
        return []
    name = item["metric"]
    if name not in METRICS:
        return [Problem(f"{where}.metric", f"must be one of {METRICS.list()}", name,
                        "use a registered metric")]
    m, out = METRICS.get(name), []
    hw, time = item.get("hw"), item.get("time")
    if m.uses_hw:
        if _str(hw) and (p := hw_problem(f"{where}.hw", hw)):
            out.append(p)
        if time is not None and (p := time_problem(f"{where}.time", time)):
            out.append(p)
    else:
        for key in ("hw", "time"):
            if item.get(key) is not None:
                out.append(Problem(f"{where}.{key}", f"applies to accuracy only, not to {name}",
                                   item[key], f"remove {key} from this entry"))
    direction = item.get("direction")
    if direction in ("minimize", "maximize") and direction != m.direction:
        out.append(Problem(f"{where}.direction", f"{name} is always to {m.direction}", direction,
                           f"write direction: {m.direction} or leave it out"))
    return out


def _objective_problems(raw: dict) -> list[Problem]:
    out, keys = [], {}
    items = raw.get("objectives")
    for i, item in enumerate(items if isinstance(items, list) else []):
        out += _metric_problems(f"objectives[{i}]", item)
    for i, c in enumerate(raw.get("constraints") or []):
        out += _metric_problems(f"constraints[{i}]", c)
        if isinstance(c, dict) and c.get("max") is None and c.get("min") is None:
            out.append(Problem(f"constraints[{i}]", "needs max or min", c,
                               "add e.g. `max: 2.0` (a budget)"))
        out += _budget_problems(f"constraints[{i}]", c)
    for i, item in enumerate(items if isinstance(items, list) else []):
        key = _objective_key(item)
        if key is None:
            continue  # malformed: reported above
        if key in keys:
            out.append(Problem(f"objectives[{i}]", "objectives must differ", key,
                               f"remove the duplicate of objectives[{keys[key]}]"))
        keys.setdefault(key, i)
    return out


def _budget_problems(where: str, c: Any) -> list[Problem]:
    """Bounds no candidate can meet: every metric is >= 0 (accuracy a fraction), so a max at or
    below 0, or a min above the max, would reject every trial after hours of search."""
    if not (isinstance(c, dict) and _str(c.get("metric")) and c["metric"] in METRICS):
        return []
    lo, hi, out = c.get("min"), c.get("max"), []
    num = (int, float)
    if isinstance(hi, num) and hi <= 0:
        out.append(Problem(f"{where}.max", f"{c['metric']} is never negative, so a max <= 0 "
                           "rejects every candidate", hi, "give a positive budget, e.g. max: 5.0"))
    if c["metric"] == "accuracy" and isinstance(lo, num) and not 0 <= lo <= 1:
        out.append(Problem(f"{where}.min", "accuracy is a fraction in [0, 1]", lo,
                           "write e.g. min: 0.8 (80 %)"))
    if isinstance(lo, num) and isinstance(hi, num) and lo > hi:
        out.append(Problem(where, "min must not exceed max", {"min": lo, "max": hi},
                           "swap them or drop one"))
    return out


def _objective_key(item: Any) -> str | None:
    try:
        m = METRICS.get(item["metric"])
        hw = (item.get("hw") or "digital") if m.uses_hw else None
        return m.key(hw, time_label(item.get("time")))
    except (ConfigError, KeyError, TypeError, AttributeError):
        return None


def _fraction_keys(raw: dict) -> list[str]:
    items = [i for i in raw.get("objectives") or [] if isinstance(i, dict)]
    return [k for i, k in zip(items, map(_objective_key, items), strict=True)
            if k is not None and METRICS.get(i["metric"]).unit == "fraction"]


def _resolved_objectives(raw: dict) -> list[str]:
    return [k for k in map(_objective_key, raw.get("objectives") or []) if k is not None]


def _tabular_problems(raw: dict) -> list[Problem]:
    tab = raw.get("tabular")
    if not isinstance(tab, dict) or not _str(tab.get("path")):
        return []
    try:
        table = TabularEvaluator(resolve_path(tab["path"]), key=tab.get("key", "arch"),
                                 columns=tab.get("columns"))
        keys = _resolved_objectives(raw)
    except ConfigError as err:
        return list(err.problems)
    except (KeyError, TypeError):
        return []
    out = [Problem("tabular", f"table must have a column for every objective: {key}", key,
                   "add the column or map it under tabular.columns")
           for key in keys if not table.has(key)]
    out += table.percent_problems([k for k in _fraction_keys(raw) if table.has(k)])
    space = raw.get("space")
    if _str(space) and space in _spaces():
        out += table.key_problems(space)
    return out


def _named_problems(raw: dict) -> list[Problem]:
    out = []
    space = raw.get("space")
    if _str(space) and space not in _spaces():
        out.append(Problem("space", f"must be one of {_spaces()}", space,
                           "see `hwnas spaces list`"))
    data = raw.get("data") or {}
    name = data.get("name") if isinstance(data, dict) else None
    if not raw.get("tabular") and _str(name) and name not in _datasets():
        out.append(Problem("data.name", f"must be one of {_datasets()}", name,
                           "see `hwnas data list`"))
    sampler = raw.get("sampler")
    sampler = {"name": sampler} if _str(sampler) else (sampler or {})
    if isinstance(sampler, dict) and _str(sampler.get("name")):
        if sampler["name"] not in SAMPLERS:
            out.append(Problem("sampler.name", f"must be one of {SAMPLERS.list()}",
                               sampler["name"], "use a registered sampler"))
        elif bad := option_problems(sampler["name"], sampler.get("options") or {}):
            out.append(Problem("sampler.options", "option names must be known", bad,
                               f"use some of {option_names(sampler['name'])}"))
    return out


def _run_problems(raw: dict) -> list[Problem]:
    out = []
    if raw.get("backend") == "ray" and isinstance(raw.get("workers"), int) and raw["workers"] > 1:
        out.append(Problem("workers", "applies to the optuna backend only", raw["workers"],
                           "with backend ray set ray.max_concurrent instead"))
    storage = raw.get("storage")
    if _str(storage):
        try:
            backend = make_url(storage).get_backend_name()
            if backend not in ("sqlite", "postgresql", "mysql"):
                raise ArgumentError(backend)
        except ArgumentError:
            out.append(Problem("storage", "must be an RDB URL (sqlite, postgresql, mysql)",
                               storage, "e.g. postgresql://user@host/db or sqlite:///study.db"))
    for section in ("latency", "train"):
        node = raw.get(section) or {}
        device = node.get("device") if isinstance(node, dict) else None
        if _str(device) and is_cuda(device) and device_problem(device):  # the shared check
            out.append(device_problem(device, f"{section}.device"))
    tracking = raw.get("tracking")
    if isinstance(tracking, dict):
        out += tracking_problems(tracking)
    return out


def tracking_problems(tracking: dict[str, Any]) -> list[Problem]:
    """A tracking field set without its package installed."""
    out = []
    for field, modules in TRACKING_PACKAGES.items():
        absent = [m for m in modules if tracking.get(field) and not _installed(m)]
        if absent:
            out.append(Problem(f"tracking.{field}", "needs the tracking extra", absent,
                               "install it: pip install 'hwnas[tracking]' (uv sync --extra "
                               "tracking), or remove the field"))
    return out


def _installed(module: str) -> bool:
    if module in sys.modules:  # optuna_integration replaces its module: no __spec__ to find
        return True
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _has_cuda() -> bool:
    return torch.cuda.is_available()


def _pool_problems(raw: dict) -> list[Problem]:
    """``space_pool``: a readable file whose every line is an arch of the study's space."""
    space, pool = raw.get("space"), raw.get("space_pool")
    if not (_str(pool) and _str(space) and space in _spaces()):
        return []
    try:
        read_pool(get_space(space), resolve_path(pool))
    except ConfigError as err:
        return list(err.problems)
    return []


def registry_problems(raw: dict, cfg: StudyConfig | None = None) -> list[Problem]:
    """Every name in the study checked against its registry, plus cross-field rules."""
    return (_named_problems(raw) + _objective_problems(raw) + _tabular_problems(raw)
            + _run_problems(raw) + _pool_problems(raw))
