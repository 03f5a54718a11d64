"""Ray reads ``RAY_AUTH_MODE`` once, when it is imported: a client with the head's token on disk
and nothing exported must have token authentication on before its first ``import ray``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

# Records RAY_AUTH_MODE at the moment Ray is first imported by a Ray study's run, and stops the
# run there (the cluster's side is Ray's; this is the order of our side).
SCRIPT = """
import importlib.abc, os, sys
seen = []
class Watch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "ray" and not seen:
            seen.append(os.environ.get("RAY_AUTH_MODE"))
            raise ImportError("stopped at import ray")
        return None
sys.meta_path.insert(0, Watch())
from nas.search.run import run_search
from nas.study.files import load_study
cfg = load_study("nb201_table", {"backend": "ray", "ray.address": "127.0.0.1:1"})
try:
    run_search(cfg, out_root=sys.argv[1], progress=False)
except ImportError as err:
    print("error:", err)
print("mode at import:", seen[0] if seen else "never imported")
"""


def test_a_token_on_disk_turns_token_auth_on_before_ray_is_imported(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".ray").mkdir(parents=True)
    (home / ".ray" / "auth_token").write_text("0" * 32)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    env.update(HOME=str(home), PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "runs")], cwd=REPO,
                         env=env, capture_output=True, text=True, timeout=120)
    assert "mode at import: token" in out.stdout, out.stdout + out.stderr
