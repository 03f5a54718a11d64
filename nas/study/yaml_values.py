"""YAML as study files and ``--set`` read it: YAML 1.2's booleans, ``true`` and ``false`` only.

PyYAML follows YAML 1.1, where ``on``, ``off``, ``yes`` and ``no`` are booleans too: a study's
``pareto.shrink: off`` or ``--set pareto.shrink=off`` would reach the config as ``False`` and be
refused as "got False". Here those words stay the strings the user typed.
"""

from __future__ import annotations

import re
from typing import Any

import yaml


class Loader(yaml.SafeLoader):
    """``yaml.SafeLoader`` whose only booleans are true/false (any case, as YAML 1.2's core)."""


Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
Loader.add_implicit_resolver("tag:yaml.org,2002:bool",
                             re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                             list("tTfF"))


def loads(text: str) -> Any:
    """``text`` parsed like ``yaml.safe_load``, but ``off``/``on``/``yes``/``no`` stay strings."""
    return yaml.load(text, Loader=Loader)  # noqa: S506 (a SafeLoader subclass)
