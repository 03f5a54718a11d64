"""CLI conventions on bad input and odd outcomes: every case exits with a code and a message
that names what is wrong, never a raw traceback."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml
from study_files import TABLE, tabular_raw, write_study

import hwnas
from nas.api import result_of
from nas.cli import main
from nas.results.summary import front


def _check(path: Path, *extra: str) -> int:
    return main(["search", str(path), "--check", *extra])


def test_version(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"hwnas {hwnas.__version__}"


def test_set_overrides_any_field(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = write_study(tmp_path, tabular_raw("sets"))
    assert _check(path, "--set", "n_trials=3", "--set", "sampler.name=random",
                  "--set", "pareto.reference={latency_ms: 9}") == 0
    cfg = yaml.safe_load(capsys.readouterr().out)
    assert cfg["n_trials"] == 3 and cfg["sampler"]["name"] == "random"
    assert cfg["pareto"]["reference"] == {"latency_ms": 9}
    assert _check(path, "--set", "n_trials") == 2
    assert "KEY=VALUE" in capsys.readouterr().err
    assert _check(path, "--set", "n_trials=0") == 2  # an override is validated too
    assert "n_trials" in capsys.readouterr().err


def test_a_flag_never_hides_an_invalid_file_value(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture) -> None:
    path = write_study(tmp_path, tabular_raw("ten", n_trials="ten"))
    assert _check(path, "--n-trials", "1") == 2
    assert _check(path, "--set", "n_trials=1") == 2
    err = capsys.readouterr().err
    assert err.count("n_trials") >= 2 and "'ten'" in err


def test_yaml_syntax_error_shows_line_and_column(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("name: broken\nspace: nb201\nobjectives:\n  - {metric: accuracy\n"
                    "  - {metric: latency}\n")
    assert _check(path) == 2
    err = capsys.readouterr().err
    assert f"{path}:5:" in err and "line 5, column" in err and "Traceback" not in err


def test_check_rejects_a_key_column_without_arch_strings(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture) -> None:
    table = pd.read_parquet(TABLE).reset_index(names="row")
    table.to_parquet(tmp_path / "t.parquet")
    raw = tabular_raw("key", tabular={"path": str(tmp_path / "t.parquet"), "key": "row"})
    assert _check(write_study(tmp_path, raw)) == 2
    err = capsys.readouterr().err
    assert "tabular.key" in err and "nb201 arch strings" in err and "'arch'" in err
    raw["tabular"]["key"] = "arch"  # the right column passes
    assert _check(write_study(tmp_path, raw)) == 0


def test_check_reports_accuracy_stored_as_percent(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture) -> None:
    table = pd.read_parquet(TABLE)
    table["acc_digital"] *= 100
    table.to_parquet(tmp_path / "pct.parquet")
    raw = tabular_raw("pct", tabular={"path": str(tmp_path / "pct.parquet")})
    assert _check(write_study(tmp_path, raw)) == 2
    err = capsys.readouterr().err
    assert "acc_digital is a fraction" in err and "divide the column by 100" in err


_FAILING_SPACE = '''
from search_spaces.base import register_space
from search_spaces.nb201 import NB201Space


@register_space("cli_broken_cells")
class BrokenCells(NB201Space):
    """NB201's grammar; every model fails to build."""

    def build(self, arch, **kw):
        raise RuntimeError("this space cannot build " + arch[:10])
'''


def test_all_failed_study_exits_1_with_reasons_and_export_says_no_front(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "broken_space.py").write_text(_FAILING_SPACE)
    raw = {"name": "allfail", "space": "cli_broken_cells", "n_trials": 3,
           "data": {"name": "digits"}, "objectives": [{"metric": "accuracy"},
                                                      {"metric": "latency"}],
           "plugins": ["broken_space.py"], "heartbeat_s": 1}
    path = write_study(tmp_path, raw)
    assert main(["search", str(path), "--out", str(tmp_path), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "all 3 trial(s) failed" in err and "x RuntimeError: this space cannot build" in err
    assert "Traceback" not in err
    assert main(["export", str(tmp_path / "allfail")]) == 1
    assert "no feasible Pareto model" in capsys.readouterr().err


def test_hypervolume_reference_is_fixed_by_budgets_and_printed(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    refs = []
    for seed in (0, 1):  # two runs, different trials: the same reference point
        raw = tabular_raw(f"hv{seed}", n_trials=10, seed=seed,
                          constraints=[{"metric": "latency", "max": 8.0}])
        result = hwnas.run(write_study(tmp_path, raw), out=tmp_path)
        refs.append(result.reference)
    assert refs[0] == refs[1] == {"acc_digital": 0.0, "latency_ms": 8.0}
    assert main(["pareto", str(tmp_path / "hv0")]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "reference point acc_digital=0 (natural worst), latency_ms=8 (budget)" in out
    # Without a budget or pareto.reference, the printed line says the point moves.
    raw = tabular_raw("hvfree", n_trials=6)
    result = hwnas.run(write_study(tmp_path, raw), out=tmp_path)
    cfg, study = result.config, result.study
    assert front(cfg, study).reference == list(result_of(result.study_dir).reference.values())
    assert main(["pareto", str(result.study_dir)]) == 0
    assert "moves between runs" in " ".join(capsys.readouterr().out.split())
