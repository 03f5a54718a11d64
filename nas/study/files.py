"""Study files on disk: find one by name or path, read its YAML, apply dotted ``--set``
overrides, validate (``nas.study.config``), and save the resolved config (defaults filled in)
next to the results."""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from hwnas.common.errors import ConfigError, Problem
from hwnas.common.plugins import is_path
from hwnas.resources import studies_dir
from nas.study import yaml_values
from nas.study.checks import pydantic_problems
from nas.study.config import StudyConfig, validate_study

STUDIES_DIR = studies_dir()  # inside the installed package, else the checkout's studies/


def set_dotted(raw: dict[str, Any], dotted: str, value: Any) -> None:
    *path, last = dotted.split(".")
    node = raw
    for part in path:
        if isinstance(node.get(part), str):  # shorthand such as `sampler: nsga2`
            node[part] = {"name": node[part]}
        node = node.setdefault(part, {})
    node[last] = value


def find_study(path_or_name: str | Path) -> Path:
    p = Path(path_or_name)
    if p.suffix in (".yaml", ".yml") or p.is_file():
        if p.is_file():
            return p
        raise ConfigError.one("study file", "must exist", str(p), "check the path")
    for folder in (Path.cwd() / "studies", STUDIES_DIR):
        cand = folder / f"{p.name}.yaml"
        if cand.is_file():
            return cand
    known = sorted(f.stem for f in STUDIES_DIR.glob("*.yaml"))
    raise ConfigError.one("study", f"must be a YAML path or one of {known}", str(path_or_name),
                          "pass a study file path or the name of one in studies/")


def read_yaml(path: Path) -> Any:
    """``yaml.safe_load`` (YAML 1.2 booleans: ``off`` stays ``off``, ``nas.study.yaml_values``)
    whose syntax errors name the file, line and column."""
    try:
        return yaml_values.loads(path.read_text())
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        what = " ".join(filter(None, (err.context, err.problem)))
        raise ConfigError.one(where, "must be valid YAML", what,
                              f"fix the YAML syntax at line {mark.line + 1 if mark else '?'}, "
                              f"column {mark.column + 1 if mark else '?'}") from None
    except yaml.YAMLError as err:
        raise ConfigError.one(str(path), "must be valid YAML", str(err),
                              "fix the YAML syntax") from None


def _anchor_paths(raw: dict[str, Any], folder: Path) -> None:
    """Relative plugin files and tables are taken from the study file's folder when they exist
    there, so a study travels with its files; absolute paths reach every worker unchanged."""
    plugins = raw.get("plugins")
    if isinstance(plugins, list):
        raw["plugins"] = [str((folder / p).resolve())
                          if isinstance(p, str) and is_path(p) and (folder / p).is_file()
                          else p for p in plugins]
    tab = raw.get("tabular")
    if isinstance(tab, dict) and isinstance(tab.get("path"), str):
        rel = folder / tab["path"]
        if not Path(tab["path"]).is_absolute() and rel.is_file():
            tab["path"] = str(rel.resolve())


def load_study(path_or_name: str | Path, overrides: dict[str, Any] | None = None) -> StudyConfig:
    """Read ``studies/<name>.yaml`` (or a path), apply dotted ``overrides``, validate.

    The file's values are type-checked on their own first: an override never hides an invalid
    value in the file (``n_trials: "ten"`` stays an error when ``--n-trials 1`` is given).
    What the values refer to outside the file (a table path, a registered name) is checked on
    the merged config, so ``--set tabular.path=...`` can point a shipped study at a table."""
    path = find_study(path_or_name)
    raw = read_yaml(path) or {}
    if isinstance(raw, dict):
        _anchor_paths(raw, path.parent)
    if not overrides:
        return validate_study(raw)
    _check_values(raw)
    # a null (YAML's None) is a value like any other: it reaches the fields that take None,
    # and where a field does not, the problem says so beside the merged config's own
    nulls = [p for key, v in overrides.items() if v is None for p in [null_problem(key)] if p]
    for key, value in overrides.items():
        if not (value is None and any(p.where == key for p in nulls)):
            set_dotted(raw, key, value)
    try:
        cfg = validate_study(raw)
    except ConfigError as err:
        raise ConfigError([*nulls, *err.problems]) from None
    if nulls:
        raise ConfigError(nulls)
    return cfg


def null_problem(dotted: str) -> Problem | None:
    """The problem of setting ``dotted`` to None, or None where its field takes None (or no
    model field declares it: a key inside a free mapping, or an unknown key validation names)."""
    info = _field_at(dotted)
    if info is None or _takes_none(info.annotation):
        return None
    default = None if info.is_required() else info.get_default(call_default_factory=True)
    if isinstance(default, BaseModel):
        fix = f"set its fields instead, e.g. --set {dotted}.<field>=<value>"
    elif info.is_required():
        fix = f"give it a value, e.g. --set {dotted}=<value>"
    else:
        value = yaml.safe_dump(default, default_flow_style=True).removesuffix("...\n").strip()
        fix = f"give it a value, e.g. its default --set {dotted}={value}"
    return Problem(dotted, "must not be null: the field takes no None", None,
                   f"{fix}, or leave the override out to keep the study file's value")


def _field_at(dotted: str) -> FieldInfo | None:
    model: type[BaseModel] | None = StudyConfig
    info = None
    for part in dotted.split("."):
        info = model.model_fields.get(part) if model is not None else None
        if info is None:
            return None
        model = _model_in(info.annotation)
    return info


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The section model of a field (``TrainCfg``, ``TabularCfg | None``), else None."""
    for t in (annotation, *typing.get_args(annotation)):
        if isinstance(t, type) and issubclass(t, BaseModel):
            return t
    return None


def _takes_none(annotation: Any) -> bool:
    return annotation is Any or type(None) in typing.get_args(annotation)


def _check_values(raw: Any) -> None:
    """Types and ranges of a study file alone (pydantic), every problem at once."""
    if not isinstance(raw, dict):
        validate_study(raw)  # raises the "must be a mapping" error
    try:
        StudyConfig.model_validate(raw)
    except ValidationError as err:
        raise ConfigError(pydantic_problems(err, StudyConfig)) from None


def save_config(cfg: StudyConfig, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(cfg.dump(), sort_keys=False))
