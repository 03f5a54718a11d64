"""``bench/`` uses the library through its public names only: no private name (``_x``) of
``hwnas``, ``nas``, ``search_spaces``, ``hw_cost`` or ``analog``, and no helper of the command
line (``nas.cli``, ``nas.commands``), so the library's privates can change without a benchmark
breaking."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LIBRARY = ("hwnas", "nas", "search_spaces", "hw_cost", "analog")
COMMAND_LINE = ("nas.cli", "nas.commands")


def _private(name: str) -> bool:
    return any(p.startswith("_") and not p.startswith("__") for p in name.split("."))


def reaches_in(text: str) -> list[str]:
    """The library names an import in ``text`` reaches that are private or of the CLI."""
    out = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            if name.split(".")[0] in LIBRARY and (
                    _private(name) or name.startswith(tuple(m + "." for m in COMMAND_LINE))
                    or name in COMMAND_LINE):
                out.append(name)
    return out


def test_bench_imports_only_public_library_names() -> None:
    hits = {str(f.relative_to(REPO)): found for f in sorted((REPO / "bench").rglob("*.py"))
            if (found := reaches_in(f.read_text()))}
    assert hits == {}


def test_a_private_or_cli_import_is_found() -> None:
    text = ("from search_spaces.stats import _reference_stats as x\n"
            "from nas.commands.spaces import size_text\nimport nas.cli\n"
            "from bench.search.quality import _cell\nfrom search_spaces.stats import meta_stats\n")
    assert reaches_in(text) == ["search_spaces.stats._reference_stats",
                                "nas.commands.spaces.size_text", "nas.cli"]
