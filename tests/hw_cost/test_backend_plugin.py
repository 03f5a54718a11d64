"""A latency backend is one file: the example of docs/plugins.md, installed as a package with an
``hwnas.latency_backends`` entry point, times a real study's trials; an unknown backend is a
clear error listing the known ones."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hw_cost.backends import BACKENDS
from hw_cost.options import validate
from hwnas.common.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]


def _docs_example() -> str:
    """The backend plugin exactly as docs/plugins.md shows it."""
    text = (REPO / "docs" / "plugins.md").read_text()
    blocks = re.findall(r"```python\n(# delayed_backend/__init__.py\n.*?)```", text, re.S)
    assert len(blocks) == 1, "docs/plugins.md must show the delayed_cpu backend once"
    return blocks[0]


def _install(site: Path) -> None:
    """The example as an installed distribution: its module and a dist-info with the entry
    point (what pip writes), found by importlib.metadata on the path."""
    (site / "delayed_backend").mkdir(parents=True)
    (site / "delayed_backend" / "__init__.py").write_text(_docs_example())
    info = site / "delayed_backend-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: delayed-backend\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[hwnas.latency_backends]\ndelayed_cpu = delayed_backend\n")


@pytest.mark.slow
def test_a_study_times_its_trials_on_an_installed_backend_plugin(tmp_path: Path) -> None:
    site = tmp_path / "site"
    _install(site)
    cache = tmp_path / "cost.sqlite"
    raw = {"name": "plug", "space": "resnet", "seed": 0, "n_trials": 2,
           "data": {"name": "digits"},
           "objectives": [{"metric": "accuracy"}, {"metric": "latency"}],
           "train": {"steps": 3, "batch_size": 64, "lr": 0.05},
           "latency": {"device": "delayed_cpu", "max_seconds": 0.2, "cache": str(cache)},
           "heartbeat_s": 1}
    study = tmp_path / "plug.yaml"
    study.write_text(yaml.safe_dump(raw, sort_keys=False))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    out = subprocess.run([sys.executable, "-m", "nas.cli", "search", str(study), "--out",
                          str(tmp_path), "--no-progress"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    db = next((tmp_path / "plug").glob("*.db"))
    with sqlite3.connect(db) as con:
        latencies = [v for (v,) in con.execute(
            "SELECT value FROM trial_values WHERE objective = 1")]
    # The tiny digits ResNet runs in well under a millisecond on this CPU: every figure at or
    # above the plugin's 20 ms delay came through the plugin's timer.
    assert len(latencies) == 2 and all(v >= 20.0 for v in latencies), latencies
    with sqlite3.connect(cache) as con:  # cached under the plugin's fingerprint, apart from cpu
        values = [v for (v,) in con.execute("SELECT value FROM costs")]
    assert values and all('"backend": "delayed_cpu"' in v for v in values), values[:1]


def test_an_unknown_backend_lists_the_known_ones_and_the_fix() -> None:
    with pytest.raises(ConfigError) as err:
        validate(device="tpu")
    problem = err.value.problems[0]
    assert problem.where == "device" and problem.value == "tpu"
    assert all(name in problem.rule for name in BACKENDS.list())
    assert "hwnas.latency_backends" in problem.fix


def test_a_study_on_an_unknown_backend_is_refused_before_any_trial() -> None:
    from nas.study.config import validate_study

    raw = {"name": "s", "space": "resnet", "latency": {"device": "tpu"},
           "objectives": [{"metric": "accuracy"}, {"metric": "latency"}]}
    with pytest.raises(ConfigError, match="latency backend") as err:
        validate_study(raw)
    assert "cpu" in str(err.value) and "cuda" in str(err.value)
    assert "hwnas.latency_backends" in str(err.value)


def test_a_backend_without_ceilings_is_a_clear_roofline_error(monkeypatch) -> None:
    from hw_cost import backends, roofline

    monkeypatch.setattr(backends.CpuBackend, "matmul_n", ())
    with pytest.raises(ConfigError, match="ceilings") as err:
        roofline.measure_ceilings(threads=1)
    assert err.value.problems[0].fix


def test_cuda_is_a_clear_error_where_it_is_absent() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(ConfigError) as err:
        validate(device="cuda")
    assert err.value.problems[0].where == "device" and err.value.problems[0].fix
