"""The import contracts of ``.importlinter`` hold, and break when a layer imports a higher one.

``lint-imports`` (import-linter) checks the layers. A second check reads every module's imports
(module level and function-local alike) with ``ast``: the project's import graph has no cycle (a
function-local import that only dodges a cycle still counts), and no import goes from a layer of
``.importlinter`` to a higher one or to a sibling, so the contract holds where import-linter is
not installed too. Imports under ``if TYPE_CHECKING:`` are annotations only (never run), so they
are no arrows. The public front's lazy names (``hwnas._PUBLIC``, "module:attribute" strings) are
arrows neither tool sees: they are read here, and must point at an existing name below the
command line.
"""

from __future__ import annotations

import ast
import configparser
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("hwnas", "search_spaces", "hw_cost", "analog", "nas")
PLANTED = "from nas.cli import main  # planted: the ground floor importing the command line\n"
FRONT = "hwnas"  # the package's __init__: the public front, which names modules by string
FRONT_BELOW = "nas.commands"  # the front stands beside the command line: it may reach below it


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    pytest.importorskip("importlinter")  # a dev dependency; the project's own modules never skip
    exe = Path(sys.executable).parent / "lint-imports"
    return subprocess.run([str(exe), "--config", str(root / ".importlinter"), "--no-cache"],
                          cwd=root, env={"PYTHONPATH": str(root), "PATH": ""},
                          capture_output=True, text=True, timeout=300)


def _copy_tree(dest: Path) -> Path:
    for name in PACKAGES:
        shutil.copytree(REPO / name, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / ".importlinter", dest / ".importlinter")
    return dest


def test_the_layer_contract_holds() -> None:
    res = _lint(REPO)
    assert res.returncode == 0, res.stdout + res.stderr


def test_a_wrong_way_import_breaks_the_contract(tmp_path: Path) -> None:
    root = _copy_tree(tmp_path)
    (root / "hwnas" / "common" / "planted.py").write_text(PLANTED)
    res = _lint(root)
    assert res.returncode != 0 and "hwnas.common.planted" in res.stdout, res.stdout


# -- cycles, without import-linter -------------------------------------------------------------
def _modules(root: Path) -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for f in (root / pkg).rglob("*.py"):
            parts = list(f.relative_to(root).with_suffix("").parts)
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return out


def _imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The project modules ``name`` imports anywhere in its file (the innermost known module of
    each imported name; ``from pkg import sub`` counts ``pkg.sub`` when it is a module)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in _run_time_nodes(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                       for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def _type_checking(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _run_time_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node of ``tree`` but the bodies of ``if TYPE_CHECKING:`` (their ``else`` runs)."""
    out, todo = [], [tree]
    while todo:
        node = todo.pop()
        out.append(node)
        if _type_checking(node):
            todo.extend([node.test, *node.orelse])
        else:
            todo.extend(ast.iter_child_nodes(node))
    return out


def front_names(root: Path) -> dict[str, str]:
    """``hwnas._PUBLIC``: public name -> "module:attribute", read from the source."""
    for node in ast.parse((root / FRONT / "__init__.py").read_text()).body:
        if isinstance(node, ast.AnnAssign | ast.Assign):
            targets = [node.target] if isinstance(node, ast.AnnAssign) else node.targets
            if any(isinstance(t, ast.Name) and t.id == "_PUBLIC" for t in targets):
                return ast.literal_eval(node.value)
    return {}


def _graph(root: Path) -> dict[str, set[str]]:
    """Module -> the project modules it imports, the front's lazy names included."""
    known = _modules(root)
    graph = {m: _imports(m, p, known) for m, p in known.items()}
    if FRONT in graph:
        graph[FRONT] |= {target.split(":")[0] for target in front_names(root).values()}
    return graph


def _defines(path: Path, attr: str) -> bool:
    """Whether the module at ``path`` defines ``attr`` at module level, or lazily: the key of a
    module-level dict read by a module ``__getattr__`` (as ``hw_cost`` and ``hwnas`` do)."""
    names, lazy = set(), set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Dict):
            lazy |= {k.value for k in node.value.keys if isinstance(k, ast.Constant)}
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.ImportFrom | ast.Import):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = [node.target] if isinstance(node, ast.AnnAssign) else node.targets
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return attr in names or ("__getattr__" in names and attr in lazy)


def missing_front_names(root: Path) -> list[str]:
    """The front's "module:attribute" strings whose module or attribute does not exist."""
    known = _modules(root)
    return sorted(f"{name} -> {target}" for name, target in front_names(root).items()
                  if (m := target.split(":")[0]) not in known
                  or not _defines(known[m], target.split(":")[1]))


def cycles(root: Path) -> list[list[str]]:
    """Every group of modules that import each other, directly or through others (Tarjan)."""
    graph = _graph(root)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while (w := stack.pop()) != v:
                group.append(w)
            if group:
                out.append(sorted([v, *group]))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_import_graph_has_no_cycle() -> None:
    assert cycles(REPO) == []


def test_a_planted_cycle_is_found(tmp_path: Path) -> None:
    files = {"a": "from pkg import b\n", "b": "def f():\n    from pkg import a\n"}  # b: local
    for name, text in files.items():
        (tmp_path / "nas" / "pkg").mkdir(parents=True, exist_ok=True)
        (tmp_path / "nas" / "pkg" / f"{name}.py").write_text(text.replace("pkg", "nas.pkg"))
    for pkg in PACKAGES:
        (tmp_path / pkg).mkdir(exist_ok=True)
    assert cycles(tmp_path) == [["nas.pkg.a", "nas.pkg.b"]]


# -- layers, without import-linter -------------------------------------------------------------
def _layers(config: Path) -> list[list[str]]:
    parser = configparser.ConfigParser()
    parser.read(config)
    text = parser["importlinter:contract:layers"]["layers"]
    return [[m.strip() for m in line.split("|")] for line in text.strip().splitlines()]


def wrong_way(root: Path, config: Path) -> list[str]:
    """``a -> b`` for each import from a layer to a higher layer or to a sibling of its own."""
    layers = _layers(config)

    def where(module: str) -> tuple[int, int] | None:
        hits = [(len(m), i, j) for i, group in enumerate(layers) for j, m in enumerate(group)
                if module == m or module.startswith(m + ".")]
        return max(hits)[1:] if hits else None

    out = []
    for name, targets in _graph(root).items():
        # the front is the layer just below FRONT_BELOW; the rest of hwnas is the ground floor
        here = (where(FRONT_BELOW)[0] + 0.5, 0) if name == FRONT else where(name)
        for target in targets:
            there = where(target)
            if here and there and (there[0] < here[0] or (there[0] == here[0] and there != here)):
                out.append(f"{name} -> {target}")
    return sorted(out)


def test_no_import_goes_up_a_layer() -> None:
    assert wrong_way(REPO, REPO / ".importlinter") == []


def test_a_planted_wrong_way_import_is_found(tmp_path: Path) -> None:
    root = _copy_tree(tmp_path)
    (root / "hwnas" / "common" / "planted.py").write_text(PLANTED)
    (root / "nas" / "study" / "planted.py").write_text("import nas.results.summary\n")
    assert wrong_way(root, root / ".importlinter") == [
        "hwnas.common.planted -> nas.cli", "nas.study.planted -> nas.results.summary"]


def test_type_checking_imports_are_no_arrows(tmp_path: Path) -> None:
    root = _copy_tree(tmp_path)
    (root / "nas" / "study" / "planted.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import nas.results.summary\n"
        "else:\n    import nas.search.run\n")
    assert wrong_way(root, root / ".importlinter") == ["nas.study.planted -> nas.search.run"]


def test_every_public_name_exists() -> None:
    assert len(front_names(REPO)) >= 16
    assert missing_front_names(REPO) == []


def test_a_public_name_of_the_command_line_is_found(tmp_path: Path) -> None:
    root = _copy_tree(tmp_path)
    init = root / "hwnas" / "__init__.py"
    init.write_text(init.read_text().replace(
        '"run": "nas.api:run",', '"run": "nas.api:run",\n    "main": "nas.cli:main",'
        '\n    "gone": "nas.api:no_such_name",'))
    assert wrong_way(root, root / ".importlinter") == ["hwnas -> nas.cli"]
    assert missing_front_names(root) == ["gone -> nas.api:no_such_name"]
