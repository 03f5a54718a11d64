"""Checkpoints load with ``torch.load(weights_only=True)`` only: every kind hwnas writes
(plain export, pruned, finalized) loads in ``hwnas analog-eval``; a file built to run code at
load time, or one holding a pickled module, is refused with a clear error and runs nothing.
A broken or foreign file (truncated, changed weights, weights of another net) is refused by
``hwnas analog-eval`` with the message and no traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch

from hw_cost import static_costs
from hwnas.common.checkpoint import DIGEST_KEY, UnverifiedCheckpointWarning, state_digest
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
    assert raw[DIGEST_KEY] == state_digest(model.state_dict())
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


def _saved(tmp_path: Path, name: str = "m.pt") -> Path:
    model = _model(False)
    return save_checkpoint(tmp_path / name, space="resnet", arch=ARCH,
                           state_dict=model.state_dict(), data=DATA)


@pytest.mark.slow  # a fresh process imports the whole stack: about 15 s of CPU
def test_analog_eval_refuses_a_truncated_file_without_a_traceback(tmp_path: Path) -> None:
    path = _saved(tmp_path)
    path.write_bytes(path.read_bytes()[:1000])
    run = subprocess.run([sys.executable, "-m", "nas.cli", "analog-eval", "--checkpoint",
                          str(path), "--data", "digits"], capture_output=True, text=True,
                         env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=300)
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr and "Traceback" not in run.stdout
    assert run.stderr.startswith("hwnas: error: checkpoint: must be a complete torch.save")
    assert str(path) in run.stderr and "truncated" in run.stderr and "Fix:" in run.stderr


def _changed_weight(path: Path) -> None:
    raw = torch.load(path, weights_only=True)
    raw["state_dict"]["fc.weight"][0, 0] += 1.0
    torch.save(raw, path)


def _text(path: Path) -> None:
    path.write_text("not a model\n")


def _bare_state_dict(path: Path) -> None:
    torch.save(_model(False).state_dict(), path)


@pytest.mark.parametrize(("damage", "needle"), [
    (_changed_weight, "changed or damaged"), (_text, "text starting 'not a model"),
    (_bare_state_dict, "bare state_dict")])
def test_analog_eval_refuses_broken_and_foreign_files(tmp_path: Path, damage, needle: str,
                                                      capsys) -> None:
    path = _saved(tmp_path)
    damage(path)
    assert main(["analog-eval", "--checkpoint", str(path), "--data", "digits"]) == 2
    err = capsys.readouterr().err
    assert needle in err and str(path) in err and "Fix:" in err


def test_weights_of_another_net_are_refused_naming_the_file(tmp_path: Path) -> None:
    other = get_space("resnet").build("rn:s16-d1r1c16", in_chans=1, num_classes=10, img_size=8)
    path = save_checkpoint(tmp_path / "m.pt", space="resnet", arch=ARCH,
                           state_dict=other.state_dict(), data=DATA)
    with pytest.raises(ConfigError, match="must fit space.build") as err:
        load_checkpoint(path)
    assert str(path) in str(err.value) and ARCH in str(err.value)


def test_unknown_space_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = save_checkpoint(tmp_path / "m.pt", space="resnet", arch=ARCH,
                           state_dict=_model(False).state_dict(), data=DATA)
    raw = torch.load(path, weights_only=True)
    raw["space"] = "nospace"
    torch.save(raw, path)
    with pytest.raises(ConfigError, match="nospace") as err:
        load_checkpoint(path)
    assert str(path) in str(err.value)


def test_checkpoint_written_before_the_checksum_still_loads(tmp_path: Path) -> None:
    model = _model(False)
    path = tmp_path / "old.pt"
    torch.save({"format": "hwnas-checkpoint/1", "space": "resnet", "arch": ARCH,
                "state_dict": model.state_dict(), "data": DATA, "hw": "digital", "metrics": {},
                "config": {}, "provenance": {}}, path)
    with pytest.warns(UnverifiedCheckpointWarning, match="cannot be verified"):
        loaded, meta = load_checkpoint(path)
    x = torch.randn(2, 1, 8, 8)
    torch.testing.assert_close(loaded(x), model(x), rtol=0, atol=0)
    assert DIGEST_KEY not in meta


def test_train_save_writes_a_verified_checkpoint(tmp_path: Path, capsys) -> None:
    path = tmp_path / "model.pt"
    assert main(["train", "resnet", ARCH, "--data", "digits", "--steps", "2", "--threads", "1",
                 "--save", str(path)]) == 0, capsys.readouterr().err
    raw = torch.load(path, weights_only=True)
    assert raw[DIGEST_KEY] == state_digest(raw["state_dict"])
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnverifiedCheckpointWarning)  # verified: no warning
        load_checkpoint(path)
