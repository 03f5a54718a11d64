"""Supernet training: resume equals an uninterrupted run, checkpoints load weights-only, and a
changed config, another space's checkpoint or an uncovered arch are clear errors."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from hwnas.common.errors import ConfigError
from hwnas.train.supernet import SupernetTrainConfig, read_checkpoint, train_supernet
from nas.cli import main
from search_spaces.supernet import build_supernet
from search_spaces.supernet.load import load_supernet

# Tiny: 4 steps of 4 images, the smallest sandwich, HWA noise on (the noise stream is resumed).
CFG = SupernetTrainConfig(space="mbconv", train_limit=64, steps=4, batch_size=4, k=1,
                          warmup_steps=1, hwa_noise=0.05)


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    # module scope: the module-scoped `straight` run must use the thread count of the runs it
    # is compared with bit for bit (float sums differ between thread counts)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    path = tmp_path_factory.mktemp("sn") / "straight.pt"
    train_supernet(CFG, path, build=build_supernet)
    return path


def test_resume_continues_exactly(straight, tmp_path):
    path = tmp_path / "resumed.pt"

    def crash(p: dict) -> None:
        if p["step"] == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_supernet(CFG, path, build=build_supernet, checkpoint_every=1, on_progress=crash)
    summary = train_supernet(CFG, path, build=build_supernet, resume=True)
    assert summary["resumed_from"] == 2
    a, b = read_checkpoint(straight)["state_dict"], read_checkpoint(path)["state_dict"]
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=0, msg=key)


def test_checkpoint_is_weights_only_with_plain_metadata(straight):
    ck = torch.load(straight, weights_only=True)
    assert ck["space"] == "mbconv" and ck["step"] == CFG.steps
    assert ck["config"]["hwa_noise"] == 0.05 and ck["seconds"] > 0
    net, meta = load_supernet(straight, space="mbconv")
    assert not net.training and meta["config"]["k"] == 1


def test_training_moves_the_bank(straight):
    torch.manual_seed(CFG.seed)
    fresh = load_supernet(straight)[0].state_dict()
    from search_spaces.supernet import build_supernet

    torch.manual_seed(CFG.seed)
    init = build_supernet("mbconv", in_chans=1, num_classes=10, img_size=28).state_dict()
    assert any(not torch.equal(fresh[k], init[k]) for k in init if k.startswith("params."))


def test_resume_with_a_changed_config_is_an_error(straight, tmp_path):
    path = tmp_path / "x.pt"
    path.write_bytes(straight.read_bytes())
    with pytest.raises(ConfigError, match="lr must match the checkpoint's config"):
        train_supernet(replace(CFG, lr=0.2), path, build=build_supernet, resume=True)


def test_checkpoint_of_another_space_is_an_error(straight):
    with pytest.raises(ConfigError, match="must be a resnet supernet.*holds a mbconv"):
        load_supernet(straight, space="resnet")


def test_not_a_supernet_checkpoint_is_an_error(tmp_path):
    path = tmp_path / "model.pt"
    torch.save({"state_dict": {}}, path)
    with pytest.raises(ConfigError, match="hwnas-supernet/1"):
        read_checkpoint(path)


def test_bad_train_config_lists_every_problem():
    with pytest.raises(ConfigError) as err:
        SupernetTrainConfig(space="resnet", steps=0, k=-1)
    assert len(err.value.problems) == 2


def test_cli_score_rejects_an_uncovered_arch(straight, capsys):
    assert main(["supernet", "score", str(straight), "rn:s16-d1r1c16"]) == 2
    assert "mbconv supernet" in capsys.readouterr().err


def test_unknown_device_is_a_clear_error_before_any_step(tmp_path):
    path = tmp_path / "x.pt"
    with pytest.raises(ConfigError, match="supernet train device.*cuda device.*gpu0"):
        train_supernet(CFG, path, build=build_supernet, device="gpu0")
    assert not path.exists()


@pytest.mark.gpu
def test_cuda_run_resumes_on_the_cpu(tmp_path):
    """The device is not part of the config: steps 1-2 on CUDA, 3-4 on the CPU."""
    path = tmp_path / "x.pt"

    def crash(p: dict) -> None:
        if p["step"] == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_supernet(CFG, path, build=build_supernet, checkpoint_every=1, on_progress=crash,
                       device="cuda")
    half = read_checkpoint(path)["state_dict"]
    assert all(v.device.type == "cpu" for v in half.values())  # loads anywhere
    summary = train_supernet(CFG, path, build=build_supernet, resume=True)
    assert summary["resumed_from"] == 2 and summary["device"] == "cpu"
    done = read_checkpoint(path)
    assert done["step"] == CFG.steps
    assert any(not torch.equal(half[k], done["state_dict"][k]) for k in half
               if k.startswith("params."))
