"""Plugins: a space and a hardware model defined outside hwnas reach every process that
validates or scores trials (two Optuna workers, Ray trials), through a study file's
``plugins:`` list or an installed entry point; a broken plugin and a duplicate name are clear
errors."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from optuna.trial import TrialState
from study_files import TABLE, tabular_raw, write_study

from nas.cli import main
from nas.study import store

PLUGIN = '''
"""A user's own space and hardware model, outside the hwnas package."""
from analog.hw import HW, DigitalHW
from search_spaces.base import register_space
from search_spaces.nb201 import NB201Space


@register_space("{space}")
class UserCells(NB201Space):
    """NB201's grammar under the user's own name."""


HW.register("{hw}")(DigitalHW("{hw}", "a user's hardware model (digital arithmetic)"))
'''


def _plugin_study(folder: Path, name: str, **changes: object) -> Path:
    """A tabular study over a plugin space, scored for a plugin hardware model."""
    space, hw = f"{name}_cells", f"{name}_hw"
    (folder / "user_plugin.py").write_text(PLUGIN.format(space=space, hw=hw))
    raw = tabular_raw(name, space=space, plugins=["user_plugin.py"],
                      objectives=[{"metric": "accuracy", "hw": hw}, {"metric": "latency"}],
                      tabular={"path": str(TABLE), "columns": {f"acc_{hw}": "acc_digital"}},
                      pareto={"reference": {f"acc_{hw}": 0.0, "latency_ms": 12.0}}, **changes)
    return write_study(folder, raw)


def _complete(study_dir: Path) -> list:
    _, study, _ = store.load_dir(study_dir)
    return study.get_trials(states=(TrialState.COMPLETE,))


@pytest.mark.slow
def test_plugin_space_and_hw_in_two_optuna_workers(tmp_path: Path) -> None:
    path = _plugin_study(tmp_path, "wk", n_trials=16)
    assert main(["search", str(path), "--out", str(tmp_path), "--workers", "2",
                 "--no-progress"]) == 0
    done = _complete(tmp_path / "wk")
    assert len(done) >= 16
    # Each spawned worker validates the study, which needs the plugin's names: a worker that
    # cannot load the plugin exits non-zero and the search fails. Which worker scores which
    # trial is a race (one may take all 16 while the other starts), so only the set is bounded.
    assert {t.user_attrs["worker"] for t in done} <= {0, 1}
    assert all(t.values[0] == t.user_attrs["acc_wk_hw"] for t in done)


@pytest.mark.slow
def test_plugin_space_and_hw_in_ray_trials(tmp_path: Path) -> None:
    path = _plugin_study(tmp_path, "rt", n_trials=4, backend="ray",
                         ray={"cpus_per_trial": 1, "max_concurrent": 2})
    assert main(["search", str(path), "--out", str(tmp_path), "--no-progress"]) == 0
    done = _complete(tmp_path / "rt")
    assert len(done) == 4 and all(t.user_attrs["worker"] == "ray" for t in done)


def _hwnas(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    """The CLI in a fresh interpreter: entry points and imports as a user's shell sees them."""
    full = {**os.environ, **env}
    return subprocess.run([sys.executable, "-m", "nas.cli", *args], cwd=cwd, env=full,
                          capture_output=True, text=True, timeout=300)


def test_entry_point_plugin_is_listed(tmp_path: Path) -> None:
    """An installed distribution's ``hwnas.spaces`` entry point registers its space."""
    site = tmp_path / "site"
    (site / "ep_plugin").mkdir(parents=True)
    (site / "ep_plugin" / "__init__.py").write_text(PLUGIN.format(space="ep_cells",
                                                                  hw="ep_hw"))
    info = site / "ep_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ep-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[hwnas.spaces]\nep_cells = ep_plugin\n")
    env = {"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    out = _hwnas(["spaces", "list", "ep_*"], tmp_path, **env)
    assert out.returncode == 0, out.stderr
    assert "ep_cells" in out.stdout


def test_broken_plugin_names_itself_with_one_traceback(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("import numpy\nraise ImportError('needs libfoo')\n")
    raw = tabular_raw("broken", plugins=["broken.py"])
    out = _hwnas(["search", str(write_study(tmp_path, raw)), "--check"], tmp_path)
    assert out.returncode == 2
    assert "plugin" in out.stderr and "broken.py" in out.stderr and "needs libfoo" in out.stderr
    assert out.stderr.count("Traceback") == 1


def test_duplicate_registration_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "dup.py").write_text(textwrap.dedent('''
        from search_spaces.base import register_space
        from search_spaces.nb201 import NB201Space

        @register_space("nb201")
        class Mine(NB201Space):
            """Takes a name hwnas already uses."""
    '''))
    raw = tabular_raw("dup", plugins=["dup.py"])
    out = _hwnas(["search", str(write_study(tmp_path, raw)), "--check"], tmp_path)
    assert out.returncode == 2
    err = out.stderr
    assert "space 'nb201'" in err and "registered once" in err
    assert "already registered by search_spaces.nb201" in err and "dup.py" in err
