"""hwnas: hardware-aware neural architecture search with measured latency and analog-AI accuracy.

The library's own helpers live here (``hwnas.common``, ``hwnas.train``, ``hwnas.compress``); the
search, spaces, costs and hardware models are the packages ``nas``, ``search_spaces``, ``hw_cost``
and ``analog``. Public names are resolved on first use, so ``import hwnas`` stays light and
``nas`` (which imports ``hwnas.common``) can import this package without a cycle.
"""

from __future__ import annotations

import importlib
import os
from importlib.metadata import PackageNotFoundError, version
from typing import Any

try:
    __version__ = version("hwnas")
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"

# Ray (2.45 on) turns a driver started by `uv run` into workers started by `uv run`, each in an
# uploaded copy of the working directory, the .venv included: 6.2 GB per `ray.init` from this
# checkout, which filled a CI machine's disk. Workers need only the driver's interpreter, which
# Ray gives them without that copy (every node has hwnas installed: docs/multi_node.md). Ray reads
# the switch when it is imported, hence here, before any `import ray`; set it to 1 to opt back in.
os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")

# public name -> "module:attribute"
_PUBLIC: dict[str, str] = {
    "run": "nas.api:run",
    "RunResult": "nas.api:RunResult",
    "StudyFailed": "nas.api:StudyFailed",
    "result_of": "nas.api:result_of",
    "run_search": "nas.search.run:run_search",
    "StudyConfig": "nas.study.config:StudyConfig",
    "load_study": "nas.study.files:load_study",
    "load_plugins": "hwnas.common.plugins:load_plugins",
    "get_space": "search_spaces:get_space",
    "list_spaces": "search_spaces:list_spaces",
    "cost_of": "hw_cost:cost_of",
    "get_hw": "analog:get_hw",
    "list_hw": "analog:list_hw",
    "evaluate_hw": "analog:evaluate",
    "fit": "hwnas.train.loop:fit",
    "load_data": "hwnas.train.data:load_data",
}


def __getattr__(name: str) -> Any:
    target = _PUBLIC.get(name)
    if target is None:
        raise AttributeError(f"module 'hwnas' has no attribute {name!r}")
    module, attr = target.split(":")
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value  # resolve once
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_PUBLIC])


__all__ = ["__version__", *_PUBLIC]
