"""User extensions: entry points and the study file's ``plugins:`` list.

A plugin is a Python module that registers spaces, hardware models, data sets, metrics or latency
backends with the usual decorators when it is imported. It reaches hwnas in one of two ways:

* an installed package declares an entry point in one of ``GROUPS`` (the entry point's value is
  the module to import), e.g. in its ``pyproject.toml``::

      [project.entry-points."hwnas.spaces"]
      tiny = "my_package.spaces"

* a study file lists it: ``plugins: [my_package.spaces, path/to/file.py]``.

Every process that validates a study imports them (``nas.study.config.validate_study``), so Optuna
workers and Ray trials see the same registries as the process that started the study.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
import traceback
from collections.abc import Iterable
from importlib.metadata import entry_points
from pathlib import Path

from hwnas.common.errors import HwnasError

GROUPS = ("hwnas.spaces", "hwnas.hardware", "hwnas.datasets", "hwnas.metrics",
          "hwnas.latency_backends")

_loaded: dict[str, str] = {}  # plugin spec -> module name, once per process
_entry_points_done = False


class PluginError(HwnasError):
    """A plugin failed to import. The message names it and carries its traceback (once)."""

    def __init__(self, spec: str, err: BaseException):
        self.spec = spec
        tb = "".join(traceback.format_exception(err)).rstrip()
        super().__init__(f"plugin {spec!r} failed to import: {type(err).__name__}: {err}\n"
                         f"{tb}\nFix: correct the plugin, or remove it from the study's "
                         "`plugins:` list / uninstall the package that declares it")


def current() -> str | None:
    """The plugin being imported right now (registries name it in duplicate errors)."""
    return _current[-1] if _current else None


_current: list[str] = []


def load_entry_points() -> None:
    """Import every module declared under ``GROUPS`` (once per process)."""
    global _entry_points_done
    if _entry_points_done:
        return
    _entry_points_done = True  # set first: a plugin that lists a registry must not recurse
    for group in GROUPS:
        for ep in entry_points(group=group):
            _import(f"{ep.value} (entry point {group}:{ep.name})", ep.load)


def load_plugins(items: Iterable[str]) -> list[str]:
    """Import each plugin (a module name or a ``.py`` path); returns their module names."""
    load_entry_points()
    return [_load_one(str(item)) for item in items]


def is_path(spec: str) -> bool:
    return spec.endswith(".py") or "/" in spec or "\\" in spec


def _load_one(spec: str) -> str:
    if spec not in _loaded:
        loader = (lambda: _import_file(Path(spec))) if is_path(spec) else (
            lambda: importlib.import_module(spec).__name__)
        _loaded[spec] = _import(spec, loader)
    return _loaded[spec]


def _import(label: str, load) -> str:  # noqa: ANN001 - a zero-argument callable
    _current.append(label)
    try:
        out = load()
    except HwnasError:
        raise
    except BaseException as err:  # noqa: BLE001 - any import failure is the plugin's
        raise PluginError(label, err) from None
    finally:
        _current.pop()
    return out if isinstance(out, str) else getattr(out, "__name__", label)


def _import_file(path: Path) -> str:
    path = path.resolve()
    if not path.is_file():
        raise FileNotFoundError(f"no plugin file at {path}")
    # One stable module name per file: the same file loaded twice is the same module.
    name = f"hwnas_plugin_{path.stem}_{hashlib.sha1(str(path).encode()).hexdigest()[:8]}"
    if name in sys.modules:
        return name
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return name
