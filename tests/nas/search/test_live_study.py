"""A real study end to end (digits, dense ResNet space, aihwkit PCM noise at 1 day, measured
latency): `hwnas run` writes trials, checkpoints, checked ONNX files, cards and the report."""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest
import torch
from optuna.trial import TrialState
from study_files import live_raw, write_study

from hw_cost import static_costs
from hwnas.common.checkpoint import FORMAT
from hwnas.common.errors import ConfigError
from nas.cli import main
from nas.results.export import arch_dirname
from nas.study import store
from search_spaces.checkpoint import load_checkpoint, save_checkpoint

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def live_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("live")
    path = write_study(root, live_raw("live", n_trials=2))
    assert main(["run", str(path), "--out", str(root), "--no-progress"]) == 0
    return root / "live"


def test_every_metric_is_a_trial_attribute(live_dir: Path) -> None:
    cfg, study, _ = store.load_dir(live_dir)
    done = study.get_trials(states=(TrialState.COMPLETE,))
    assert len(done) == 2
    for t in done:
        attrs = t.user_attrs
        for key in ("arch", "acc_digital", "acc_pcm@1d", "acc_pcm@1d_std", "latency_ms",
                    "latency_p10_ms", "latency_p90_ms", "macs", "params", "analog_energy_uj",
                    "pcm_analog_mac_fraction", "train_seconds"):
            assert key in attrs, key
        assert t.values == [attrs["acc_pcm@1d"], attrs["latency_ms"]]
        assert 0.0 <= attrs["acc_pcm@1d"] <= 1.0 and attrs["pcm_analog_mac_fraction"] > 0.9
        assert store.load_weights(live_dir, study, t) is not None


def test_checkpoints_round_trip_and_onnx_matches(live_dir: Path) -> None:
    cfg, study, _ = store.load_dir(live_dir)
    index = json.loads((live_dir / "pareto" / "index.json").read_text())
    assert index["models"]
    for row in index["models"]:
        folder = live_dir / "pareto" / row["folder"]
        assert folder.name == arch_dirname(row["arch"])
        model, meta = load_checkpoint(folder / "model.pt")
        assert meta["format"] == FORMAT and meta["arch"] == row["arch"] and meta["hw"] == "pcm"
        assert meta["data"] == {"name": "digits", "in_chans": 1, "num_classes": 10,
                                "img_size": 8}
        assert meta["config"]["name"] == "live" and meta["provenance"]["versions"]["torch"]
        trial = study.trials[row["trial"]]
        ref = type(model)  # same weights as the trial's artifact
        weights = store.load_weights(live_dir, study, trial)
        assert all(torch.equal(weights[k], v) for k, v in model.state_dict().items()), ref
        card = json.loads((folder / "card.json").read_text())
        assert card["onnx"]["ok"] and card["onnx"]["max_abs_diff"] < 1e-3
        keys = {m["key"]: m for m in card["metrics"]}
        assert keys["acc_pcm@1d"]["hw"] == "pcm" and keys["acc_pcm@1d"]["time"] == "1d"
        assert "std" in keys["acc_pcm@1d"] and keys["latency_ms"]["device"]
        assert card["test"]["acc_digital"] >= 0 and "## Every metric" in (
            folder / "card.md").read_text()
        energy = card["energy"]  # analog and digital energy side by side, both estimates
        assert energy["estimate"] and energy["hardware_model"] == "pcm"
        assert energy["analog_uj"] > 0 and energy["digital_reference_uj"] > 0
        assert energy["tile_size"] == 512  # pcm's tiles, the accuracy model's
        assert "Energy per inference (estimate)" in (folder / "card.md").read_text()


def test_report_renders(live_dir: Path) -> None:
    page = (live_dir / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 2
    for text in ("Pareto front", "All trials", "acc_pcm@1d", "hypervolume",
                 "energy analog uJ (estimate)", "energy digital uJ (estimate)"):
        assert text in page


def test_budget_is_checked_before_training(tmp_path: Path) -> None:
    raw = live_raw("tight", n_trials=2, constraints=[{"metric": "latency", "max": 1e-4}])
    assert main(["search", str(write_study(tmp_path, raw)), "--out", str(tmp_path),
                 "--no-progress"]) == 0
    study = optuna.load_study(study_name="tight",
                              storage=f"sqlite:///{tmp_path / 'tight' / 'study.db'}")
    for t in study.get_trials(states=(TrialState.COMPLETE,)):
        assert t.constraints["latency_ms"] > 0 and "train_seconds" not in t.user_attrs
        assert t.values[0] == 0.0  # the accuracy objective's worst value, never trained
        assert store.load_weights(tmp_path / "tight", study, t) is None


def test_checkpoint_bad_input_and_stored_module(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="hwnas export"):
        load_checkpoint(tmp_path / "absent.pt")
    torch.save({"weights": 1}, tmp_path / "other.pt")
    with pytest.raises(ConfigError, match=FORMAT):
        load_checkpoint(tmp_path / "other.pt")
    from hwnas.compress.prune import PruneConfig, prune
    from search_spaces import get_space

    net = get_space("resnet").build("rn:s16-d1r1c16", in_chans=1, num_classes=10, img_size=8)
    prune(net, (1, 8, 8), PruneConfig(ratio=0.5),
          measure=lambda m: static_costs(m, (1, 8, 8)))  # no longer space.build(arch)
    save_checkpoint(tmp_path / "m.pt", space="resnet", arch="rn:s16-d1r1c16",
                    state_dict=net.state_dict(), module=net,
                    data={"name": "digits", "in_chans": 1, "num_classes": 10, "img_size": 8})
    model, meta = load_checkpoint(tmp_path / "m.pt")
    x = torch.randn(2, 1, 8, 8)
    torch.testing.assert_close(model(x), net.eval()(x))
    assert "module" not in meta and meta["shapes"]


@pytest.mark.parametrize("arch", ["rn:s16-d1r1c16", "|nor_conv_3x3~0|+|none~0|skip_connect~1|",
                                  "vit:p4-e192-d4-h4-m4", "plain_name-1.0", "x" * 300])
def test_arch_dirname_is_safe_and_unique(arch: str) -> None:
    name = arch_dirname(arch)
    assert name and len(name) <= 110 and all(c.isalnum() or c in "._-" for c in name)
    assert arch_dirname(arch) == name and arch_dirname(arch + "0") != name
