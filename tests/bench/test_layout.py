"""bench/'s one rule: every script runs as ``python -m bench.<concern>.<script>`` from the
repository root. So no script edits ``sys.path``, every import of a bench module is spelled
``bench.…`` (a bare ``import truth`` works only from one folder), and each script's own text
names the command that runs it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from bench import BENCH, DATA

SOURCES = sorted(p for p in BENCH.rglob("*.py") if DATA not in p.parents)
# Names a bare import could mean only as a bench sibling: every bench module and folder, less the
# project's and libraries' top-level packages that share a folder's name (analog, hw_cost, ray).
SIBLINGS = ({p.stem for p in SOURCES} | {p.parent.name for p in SOURCES}) - {
    "analog", "hw_cost", "ray", "bench", "__init__", "__main__"}


def _module(path: Path) -> str:
    name = ".".join(path.relative_to(BENCH.parent).with_suffix("").parts)
    return name.removesuffix(".__main__").removesuffix(".__init__")


def _bare_sibling_imports(tree: ast.AST) -> list[str]:
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return [n for n in names if n.split(".")[0] in SIBLINGS]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(BENCH)))
def test_imports_are_absolute_and_leave_sys_path_alone(path: Path) -> None:
    text = path.read_text()
    assert "sys.path" not in text, f"{path}: run it as python -m {_module(path)} instead"
    assert _bare_sibling_imports(ast.parse(text)) == [], f"{path}: spell them bench.<...>"


SCRIPTS = [p for p in SOURCES
           if p.name == "__main__.py" or '__name__ == "__main__"' in p.read_text()]


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: str(p.relative_to(BENCH)))
def test_each_script_names_the_command_that_runs_it(path: Path) -> None:
    assert f"python -m {_module(path)}" in path.read_text()


def test_the_rule_catches_a_bare_sibling_import() -> None:
    tree = ast.parse("import fidelity_truth\nfrom truth import DATA\nimport analog\n"
                     "from bench.fidelity import truth\nimport ray\n")
    assert _bare_sibling_imports(tree) == ["truth"]
    assert {"truth", "collect", "_results", "gpu", "campaign"} <= SIBLINGS
    assert _module(BENCH / "fidelity" / "__main__.py") == "bench.fidelity"
