"""Two Ray nodes on one machine: trials on both, then the second node killed mid-study.

    python -m bench.ray.multinode --trials 8 --kill-after 3

Starts a head (``ray start --head``) and a second raylet (``ray start --address``), each with
one CPU, its own ports and a custom resource ``node<i>``, in one temp dir; runs
``hwnas search --backend ray --address`` on a tiny live study (digits, a few SGD steps); after
``--kill-after`` complete trials it SIGKILLs the second node's raylet and lets the study finish
on the head. Reports the trials per Ray node (``ray_node_id`` of each trial), wall time, the
complete trials before the kill and whether all of them are still there after (lost trials),
and writes ``bench/results/ray_multinode.md``. Every process it started is ended at the end.
Ray 2.60 turns token authentication on: both nodes and the search run with
``RAY_AUTH_MODE=token`` and the head's ``~/.ray/auth_token`` (docs/multi_node.md).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import optuna
import yaml

from bench import RESULTS, ROOT
from nas.study import store

PORT = 46379


def node_args(i: int, temp: Path) -> list[str]:
    b = 46400 + 40 * i  # clear of the GCS port
    return ["--num-cpus", "1", "--temp-dir", str(temp), "--disable-usage-stats",
            "--node-manager-port", str(b + 1), "--object-manager-port", str(b + 2),
            "--min-worker-port", str(b + 10), "--max-worker-port", str(b + 39),
            "--dashboard-agent-listen-port", str(b + 3), "--dashboard-agent-grpc-port",
            str(b + 4), "--metrics-export-port", str(b + 5), "--runtime-env-agent-port",
            str(b + 6), "--resources", json.dumps({f"node{i}": 1})]


def env() -> dict[str, str]:
    return {**os.environ, "RAY_AUTH_MODE": "token", "RAY_USAGE_STATS_ENABLED": "0",
            "PYTHONPATH": str(ROOT)}


def ray_start(i: int, temp: Path) -> None:
    ray = str(Path(sys.executable).with_name("ray"))
    head = ["--head", "--port", str(PORT), "--include-dashboard", "false"]
    where = head if i == 0 else ["--address", f"127.0.0.1:{PORT}"]
    for attempt in range(3):  # a loaded host can miss Ray's agent start-up deadline
        res = subprocess.run([ray, "start", *where, *node_args(i, temp)], env=env(),
                             timeout=600, capture_output=True, text=True)
        if res.returncode == 0:
            return
        print(f"ray start (node {i}, attempt {attempt + 1}) failed: "
              f"{res.stderr.strip().splitlines()[-1:]}", flush=True)
        if i == 0:
            for pid in pids_with(str(temp)):
                os.kill(pid, signal.SIGKILL)
    raise RuntimeError(f"ray start of node {i} failed 3 times (logs in {temp})")


def pids_with(text: str) -> list[int]:
    """Processes whose command line contains ``text`` (ours: the temp dir or a node's port)."""
    out = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if text in cmd and int(proc.name) != os.getpid():
                out.append(int(proc.name))
    return out


def study_raw(name: str, trials: int) -> dict:
    return {"name": name, "space": "resnet", "seed": 0, "n_trials": trials,
            "data": {"name": "digits"},
            "objectives": [{"metric": "accuracy"}, {"metric": "latency"}],
            "train": {"steps": 20, "batch_size": 64, "lr": 0.05},
            "hw_eval": {"repeats": 2, "eval_limit": 200}, "latency": {"max_seconds": 0.2},
            "backend": "ray", "ray": {"cpus_per_trial": 1, "max_concurrent": 2,
                                      "max_failures": 2}}


def complete(db: Path, name: str) -> list[optuna.trial.FrozenTrial]:
    if not store.sqlite_state_counts(db):  # the search is still creating the study
        return []
    study = optuna.load_study(study_name=name, storage=f"sqlite:///{db}")
    return study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))


def run(args: argparse.Namespace, tmp: Path) -> dict:
    temp = tmp / "ray"
    ray_start(0, temp)
    ray_start(1, temp)
    node2 = node_args(1, temp)[node_args(1, temp).index("--node-manager-port") + 1]
    path = tmp / "multi.yaml"
    path.write_text(yaml.safe_dump(study_raw("multi", args.trials)))
    db = tmp / "out" / "multi" / "study.db"
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "nas.cli", "search", str(path), "--out",
                             str(tmp / "out"), "--no-progress", "--address", f"127.0.0.1:{PORT}"],
                            cwd=ROOT, env=env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    before, kill_s = [], None
    while proc.poll() is None and kill_s is None:
        time.sleep(1.0)
        if store.sqlite_state_counts(db).get("COMPLETE", 0) < args.kill_after:
            continue
        done = complete(db, "multi")
        if len(done) >= args.kill_after:
            before = [(t.number, t.values) for t in done]
            for pid in {*pids_with(f"node_manager_port={node2}"),
                        *pids_with(f"node-manager-port={node2}")}:
                os.kill(pid, signal.SIGKILL)  # the second node's raylet and workers die
            kill_s = time.perf_counter() - t0
    log, _ = proc.communicate(timeout=3600)
    wall = time.perf_counter() - t0
    done = complete(db, "multi")
    after = {t.number: t.values for t in done}
    per_node = collections.Counter(t.user_attrs.get("ray_node_id", "?")[:8] for t in done)
    return {"rc": proc.returncode, "wall_s": wall, "kill_at_s": kill_s,
            "complete": len(done), "before_kill": len(before),
            "lost": sum(after.get(n) != v for n, v in before), "per_node": dict(per_node),
            "log_tail": log.strip().splitlines()[-5:]}


def report(args: argparse.Namespace, r: dict) -> str:
    import ray

    nodes = ", ".join(f"`{k}`: {v}" for k, v in sorted(r["per_node"].items()))
    return "\n".join([
        "# Ray: two raylets, then one killed mid-study",
        "",
        f"`python -m bench.ray.multinode --trials {args.trials} --kill-after {args.kill_after}`"
        f" on {platform.node()} ({os.cpu_count()} cores shared with other jobs: wall times are "
        f"noisy), Ray {ray.__version__}, Optuna {optuna.__version__}, one CPU per node, "
        "RAY_AUTH_MODE=token.",
        "",
        "| figure | value |", "|---|---|",
        f"| exit code of `hwnas search` | {r['rc']} |",
        f"| complete trials (asked {args.trials}) | {r['complete']} |",
        f"| trials per Ray node (node id prefix) | {nodes} |",
        f"| second node SIGKILLed at | {r['kill_at_s'] and round(r['kill_at_s'], 1)} s, after "
        f"{r['before_kill']} complete trials |",
        f"| complete trials lost by the kill | {r['lost']} |",
        f"| wall time of the study | {r['wall_s']:.1f} s |",
        "",
    ])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=8)
    p.add_argument("--kill-after", type=int, default=3)
    p.add_argument("--out", default=str(RESULTS / "ray_multinode.md"))
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="hwnas-ray-") as tmp:
        try:
            r = run(args, Path(tmp))
        finally:
            for pid in pids_with(str(Path(tmp) / "ray")):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
    print(json.dumps(r, indent=1))
    from bench._results import publish

    publish(report(args, r), args.out)


if __name__ == "__main__":
    main()
