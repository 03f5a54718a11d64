"""The README's Python snippet runs as written (on the NB201 table study, so in seconds), and
leaves no global state behind: Optuna's log level and the matplotlib backend are unchanged."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib
import optuna
import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_snippet() -> str:
    text = README.read_text()
    match = re.search(r"<!-- notebook-api[^>]*-->\s*```python\n(.*?)```", text, re.S)
    assert match, "README.md lost its notebook-api snippet"
    return match.group(1)


@pytest.mark.slow
def test_readme_notebook_snippet_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture) -> None:
    monkeypatch.chdir(tmp_path)
    backend, verbosity = matplotlib.get_backend(), optuna.logging.get_verbosity()
    scope: dict = {}
    exec(compile(readme_snippet(), str(README), "exec"), scope)  # noqa: S102 - our own README
    result = scope["result"]
    assert len(result.study.trials) == 30 and not result.front.empty
    assert set(result.front.columns) >= {"trial", "arch", "acc_digital", "latency_ms"}
    assert result.reference == {"acc_digital": 0.0, "latency_ms": 12.0}
    assert result.paths["storage"].is_file() and result.paths["trials"].is_file()
    assert "hypervolume" in capsys.readouterr().out
    assert matplotlib.get_backend() == backend
    assert optuna.logging.get_verbosity() == verbosity
    assert result.reopened == 0 and "reopened" not in repr(result)
    from nas.api import ReopenedStudy

    with pytest.warns(ReopenedStudy, match="held 30 trials, and this run added 0"):
        exec(compile(readme_snippet(), str(README), "exec"), scope)  # noqa: S102
    assert scope["result"].reopened == 30 and "reopened with 30 trials" in repr(scope["result"])


def test_readme_install_names_a_config_that_matches_the_checkouts() -> None:
    """The documented wheel install hands aihwkit's build the same setting the checkout's own
    commands read (pyproject's ``tool.uv.extra-build-dependencies``)."""
    import tomllib

    root = README.parent
    command = next(line for line in README.read_text().splitlines()
                   if line.startswith("uv pip install") and "--config-file" in line)
    config = command.split("--config-file")[1].split()[0]
    shipped = tomllib.loads((root / config).read_text())["extra-build-dependencies"]
    project = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["uv"]
    assert shipped == project["extra-build-dependencies"]
    ci = (root / ".ci" / "wheel_check").read_text().splitlines()
    assert any(f"--config-file {config}" in line for line in ci if not line.startswith("#"))
