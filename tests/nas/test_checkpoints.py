"""Checkpoints load with ``torch.load(weights_only=True)`` only: every kind hwnas writes
(plain export, pruned, finalized) loads in ``hwnas analog-eval``; a file built to run code at
load time, or one holding a pickled module, is refused with a clear error and runs nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from hw_cost import static_costs
from hwnas.common.errors import ConfigError
from hwnas.compress.prune import PruneConfig, prune
from nas.cli import main
from search_spaces import get_space
from search_spaces.checkpoint import load_checkpoint, save_checkpoint

ARCH = "rn:s16-d1r2c24-d1r1c32"
DATA = {"name": "digits", "in_chans": 1, "num_classes": 10, "img_size": 8}


class _RunsCode:
    """Unpickling this calls ``os.system``: what a hostile checkpoint would do."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def _model(pruned: bool) -> torch.nn.Module:
    torch.manual_seed(0)
    model = get_space("resnet").build(ARCH, in_chans=1, num_classes=10, img_size=8)
    if pruned:
        prune(model, (1, 8, 8), PruneConfig(ratio=0.5),
              measure=lambda m: static_costs(m, (1, 8, 8)))
    return model.eval()


@pytest.mark.parametrize("pruned", [False, True])
def test_checkpoint_is_plain_data_and_round_trips(tmp_path: Path, pruned: bool) -> None:
    model = _model(pruned)
    path = save_checkpoint(tmp_path / "m.pt", space="resnet", arch=ARCH,
                           state_dict=model.state_dict(), data=DATA, config={"seed": (1, 2)},
                           module=model if pruned else None)
    raw = torch.load(path, weights_only=True)  # no pickled object anywhere
    assert raw["arch"] == ARCH and raw["config"] == {"seed": [1, 2]}
    json.dumps({k: v for k, v in raw.items() if k != "state_dict"})  # metadata is plain
    assert bool(raw.get("shapes")) == pruned
    loaded, meta = load_checkpoint(path)
    x = torch.randn(3, 1, 8, 8)
    torch.testing.assert_close(loaded(x), model(x))
    assert meta["space"] == "resnet" and "state_dict" not in meta


def test_checkpoint_built_to_run_code_is_refused(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pt"
    torch.save({"format": "hwnas-checkpoint/1", "payload": _RunsCode(marker)}, path)
    with pytest.raises(ConfigError, match="weights_only=True") as err:
        load_checkpoint(path)
    assert str(path) in str(err.value) and not marker.exists()
    rc = main(["analog-eval", "--checkpoint", str(path), "--data", "digits"])
    assert rc != 0 and not marker.exists()


def test_pickled_module_checkpoint_is_refused(tmp_path: Path) -> None:
    model = _model(False)
    torch.save({"format": "hwnas-checkpoint/1", "space": "resnet", "arch": ARCH,
                "module": model, "state_dict": model.state_dict(), "data": DATA},
               tmp_path / "old.pt")
    with pytest.raises(ConfigError, match="re-export"):
        load_checkpoint(tmp_path / "old.pt")


def test_module_that_is_no_build_of_the_arch_is_refused(tmp_path: Path) -> None:
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 10))
    with pytest.raises(ConfigError, match="structured pruning"):
        save_checkpoint(tmp_path / "m.pt", space="resnet", arch=ARCH,
                        state_dict=net.state_dict(), data=DATA, module=net)


@pytest.mark.parametrize("pruned", [False, True])
def test_analog_eval_loads_exported_and_pruned_checkpoints(tmp_path: Path, pruned: bool,
                                                           capsys) -> None:
    model = _model(pruned)
    path = save_checkpoint(tmp_path / "m.pt", space="resnet", arch=ARCH,
                           state_dict=model.state_dict(), data=DATA,
                           module=model if pruned else None)
    out = tmp_path / "eval"
    rc = main(["analog-eval", "--checkpoint", str(path), "--data", "digits", "--times", "1s",
               "--repeats", "2", "--references", "", "--test-limit", "100", "--threads", "1",
               "--out", str(out)])
    assert rc == 0, capsys.readouterr().err
    result = json.loads(next(out.glob("*.json")).read_text())
    assert result["model"]["arch"] == ARCH
