"""A Ray study on a token-auth cluster, as docs/multi_node.md says: the head made with
`ray get-auth-token --generate` and `RAY_AUTH_MODE=token ray start --head`, the client with the
token on disk and nothing exported. A wrong token is one error line, not 20 warnings and a
misleading hint. Real `ray start`, on one machine: a free port, one CPU, the loopback address."""

from __future__ import annotations

import csv
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
DOCS = (REPO / "docs" / "multi_node.md").read_text()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env_for(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    env.update(HOME=str(home), PYTHONPATH=str(REPO), **extra)
    return env


def ray(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "ray"), *args], env=env, capture_output=True, text=True,
                          timeout=120)


def stop_processes_under(temp: Path) -> None:
    """Ours only (their command lines name our temp dir): `ray stop` would stop every Ray of the
    machine's user."""
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and str(temp) in (proc / "cmdline").read_text():
                os.kill(int(proc.name), signal.SIGKILL)
        except (OSError, ProcessLookupError):
            continue


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    root = tmp_path_factory.mktemp("ray_token")
    # Ray's socket paths live under --temp-dir and must stay under 107 bytes: a short folder
    home, temp, port = root / "home", Path(tempfile.mkdtemp(prefix="rt")), free_port()
    home.mkdir()
    env = env_for(home)
    assert "ray get-auth-token --generate > /dev/null" in DOCS
    assert ray(["get-auth-token", "--generate"], env).returncode == 0
    assert (home / ".ray" / "auth_token").is_file()
    assert "RAY_AUTH_MODE=token ray start --head --port 6379 --num-cpus 8" in DOCS
    try:  # stopped even when the start fails half-way: no head left for other tests to find
        started = ray(["start", "--head", "--port", str(port), "--num-cpus", "1",
                       "--include-dashboard", "false", "--node-ip-address", "127.0.0.1",
                       "--temp-dir", str(temp)], {**env, "RAY_AUTH_MODE": "token"})
        assert started.returncode == 0, started.stderr[-2000:]
        yield f"127.0.0.1:{port}", home
    finally:
        stop_processes_under(temp)
        shutil.rmtree(temp, ignore_errors=True)


def search(address: str, out: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    assert "hwnas search studies/my_study.yaml --backend ray --address HEAD_IP:6379" in DOCS
    return subprocess.run(
        [str(BIN / "hwnas"), "search", "nb201_table", "--set", "n_trials=4", "--backend", "ray",
         "--address", address, "--out", str(out)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_a_study_runs_with_the_token_on_disk_and_nothing_exported(cluster, tmp_path):
    address, home = cluster
    done = search(address, tmp_path, env_for(home))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "InvalidAuthToken" not in done.stderr
    with open(tmp_path / "nb201_table" / "trials.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4 and {r["state"] for r in rows} == {"COMPLETE"}
    assert all(r["ray_node_id"] and r["hostname"] and float(r["duration_s"]) > 0 for r in rows)


@pytest.mark.slow
def test_a_wrong_token_is_one_clear_line(cluster, tmp_path):
    address, home = cluster
    wrong = "f" * 64
    done = search(address, tmp_path, env_for(home, RAY_AUTH_TOKEN=wrong))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr[-3000:]
    assert "refused this client's authentication token" in lines[0]
    assert "token from: RAY_AUTH_TOKEN" in lines[0] and address in lines[0]
    assert "ray get-auth-token --generate" in lines[0] and wrong not in lines[0]
    assert not (tmp_path / "nb201_table" / "trials.csv").exists()
