"""MkDocs hooks: pages that are generated from the code at build time, never written by hand.

``<!-- hwnas:study-reference -->`` becomes the study-file reference, one table per section, from
the pydantic models in ``nas.study.config``: every field's ``Field(description=...)``, so the
descriptions live on the models (a field without one fails the build); the ``train`` section's
come from ``hwnas.train.FitConfig``'s own declarations (``setting(default, description)``);
``<!-- hwnas:grammars -->`` becomes every registered space's arch-string grammar (its docstring);
``<!-- hwnas:registries -->`` lists the registered metrics, hardware models and data sets.
"""

from __future__ import annotations

import typing
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo


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
        why = field.description
        if not why:
            raise ValueError(f"{model.__name__}.{name} has no description: give its Field a "
                             "description= (the reference is read from the models)")
        why = why.replace("<", "&lt;").replace("|", "&#124;")
        rows.append(f"| `{name}` | {_type(field.annotation)} | {_default(field)} | {why} |")
    doc = " ".join((model.__doc__ or "").strip().split("\n\n")[0].split())  # one line
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
