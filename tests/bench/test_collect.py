"""BENCHMARKS.md is bench/collect.py's output: a hand edit, a result file without a section or a
section that does not name its commands fails here (and in CI)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench import RESULTS, ROOT
from bench.collect import collect
from bench.sections import SECTIONS, Section
from hwnas.common.errors import ConfigError


def test_benchmarks_md_is_what_collect_writes() -> None:
    assert (ROOT / "BENCHMARKS.md").read_text() == collect(), (
        "BENCHMARKS.md differs from bench/collect.py's output: edit the result file under "
        "bench/results/ (or its script), then run `python -m bench.collect`")


def test_every_section_appears_once_in_order_with_its_file_named() -> None:
    text = collect()
    spots = [text.index(f"*Result file: `bench/results/{s.name}.md`") for s in SECTIONS
             if (RESULTS / f"{s.name}.md").is_file()]
    assert spots == sorted(spots) and len(spots) == len(set(spots))
    assert text.count("*Result file: ") == len(spots)


def _folder(tmp_path: Path, **files: str) -> Path:
    for name, text in files.items():
        (tmp_path / f"{name}.md").write_text(text)
    return tmp_path


def test_a_result_file_without_a_section_is_refused(tmp_path: Path) -> None:
    folder = _folder(tmp_path, a="## A\n\n`python -m bench.x`", stray="## by hand")
    with pytest.raises(ConfigError, match="every result file must have a section") as err:
        collect(folder, (Section("a", ("python -m bench.x",)),))
    assert "stray" in str(err.value) and "bench/sections.py" in str(err.value)


def test_a_section_that_does_not_name_its_command_is_refused(tmp_path: Path) -> None:
    folder = _folder(tmp_path, a="## A\n\nfigures, no command")
    with pytest.raises(ConfigError, match="must name its commands") as err:
        collect(folder, (Section("a", ("python -m bench.x",)),))
    assert "python -m bench.x" in str(err.value)


def test_a_missing_file_is_refused_unless_optional(tmp_path: Path) -> None:
    folder = _folder(tmp_path, a="## A\n\n`python -m bench.x`")
    with pytest.raises(ConfigError, match="result file must exist"):
        collect(folder, (Section("a", ("python -m bench.x",)), Section("b", ("y",))))
    text = collect(folder, (Section("a", ("python -m bench.x",), kept="the reading"),
                            Section("b", ("y",), optional=True)))
    assert text.endswith("## A\n\n`python -m bench.x`\n\n*Result file: `bench/results/a.md`, "
                         "from the commands above; kept as recorded: the reading.*\n")


def test_sections_follow_the_listed_order_not_the_folder(tmp_path: Path) -> None:
    folder = _folder(tmp_path, a="## A `c`", b="## B `c`")
    text = collect(folder, (Section("b", ("c",)), Section("a", ("c",))))
    assert text.index("## B") < text.index("## A")



def test_a_reading_follows_its_section_and_must_exist(tmp_path: Path) -> None:
    folder = _folder(tmp_path, a="## A\n\n`python -m bench.x`")
    sections = (Section("a", ("python -m bench.x",), reading=True),)
    with pytest.raises(ConfigError, match="reading must exist"):
        collect(folder, sections)
    (folder / "readings").mkdir()
    (folder / "readings" / "a.md").write_text("Reading: fast.\n")
    assert "`python -m bench.x`\n\nReading: fast.\n\n*Result file: " in collect(folder, sections)


def test_relative_links_point_from_the_root_where_benchmarks_md_lives(tmp_path: Path) -> None:
    folder = _folder(tmp_path, a="## A `c`\n\n![plot](sub/p.png) [web](https://x.org/a.png) "
                                 "[here](#a) [abs](/etc/x)")
    (folder / "readings").mkdir()
    (folder / "readings" / "a.md").write_text("![r](../sub/q.png)\n")
    text = collect(folder, (Section("a", ("c",), reading=True),))
    targets = re.findall(r"\]\(([^)]+)\)", text)
    assert targets[1:] == ["https://x.org/a.png", "#a", "/etc/x", targets[-1]]
    assert (ROOT / targets[0]).resolve() == (folder / "sub" / "p.png").resolve()
    assert (ROOT / targets[-1]).resolve() == (folder / "sub" / "q.png").resolve()
    shipped = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", (ROOT / "BENCHMARKS.md").read_text())
    assert shipped and all((ROOT / t).is_file() for t in shipped)
