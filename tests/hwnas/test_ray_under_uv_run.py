"""A driver started by `uv run` (the README's commands) starts plain Ray workers: no upload of
the working directory, whose .venv is GBs (it filled a CI machine's disk before hwnas switched
Ray's uv hook off on import)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DRIVER = """
import json, hwnas, ray
ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
print("RUNTIME_ENV", json.dumps(dict(ray.get_runtime_context().runtime_env)))
print("ANSWER", ray.get(ray.remote(lambda: 41 + 1).remote()))
ray.shutdown()
"""


def test_a_driver_under_uv_run_gets_workers_without_a_working_dir_copy(tmp_path: Path) -> None:
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH (the README's commands need it)")
    env = {k: v for k, v in os.environ.items() if k != "RAY_ENABLE_UV_RUN_RUNTIME_ENV"}
    # A scratch folder as the driver's cwd: were the hook on, it would be the working_dir copied
    # to the workers (Ray refuses it, as the project is outside it), instead of the 6 GB checkout.
    cmd = [uv, "run", "--project", str(ROOT), "--no-sync", "--python", sys.executable,
           "python", "-c", DRIVER]
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)
    assert json.loads(lines["RUNTIME_ENV"]) == {}
    assert lines["ANSWER"] == "42"
