"""Loading a checkpoint and the DDP job must not need Torch-Pruning (a bare GPU image lacks it)."""

import subprocess
import sys

BLOCK = """
import sys
class _Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] == 'torch_pruning':
            raise ModuleNotFoundError("No module named 'torch_pruning'")
sys.meta_path.insert(0, _Block())
"""


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCK + code], capture_output=True, text=True,
                          check=False, timeout=120)


def test_checkpoint_and_ddp_import_without_torch_pruning():
    proc = _run("import search_spaces.checkpoint, hwnas.train.ddp, hwnas.compress")
    assert proc.returncode == 0, proc.stderr


def test_prune_still_reachable_from_the_package():
    ok = subprocess.run([sys.executable, "-c", "from hwnas.compress import prune, PruneConfig; "
                         "print(prune.__module__)"], capture_output=True, text=True, check=True)
    assert ok.stdout.strip() == "hwnas.compress.prune"
    blocked = _run("from hwnas.compress import prune")
    assert "torch_pruning" in blocked.stderr
