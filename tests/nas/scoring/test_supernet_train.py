"""Supernet training: resume equals an uninterrupted run, checkpoints load weights-only, the HWA
recipe (noise ramp from 0, noise-free teacher, per-channel clipping), and a changed config,
another space's checkpoint or an uncovered arch are clear errors."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from hwnas.common.errors import ConfigError
from hwnas.train.supernet import (
    SupernetTrainConfig,
    check_same_config,
    clip_bank,
    hwa_noise_at,
    read_checkpoint,
    sandwich_step,
    train_supernet,
)
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


def test_noise_ramps_from_zero():
    cfg = SupernetTrainConfig(space="mbconv", steps=10, hwa_noise=0.1, hwa_ramp=0.5)
    noise = [hwa_noise_at(cfg, s) for s in range(cfg.steps)]
    assert noise[0] == 0.0 and noise[5:] == [0.1] * 5
    assert noise == sorted(noise) and 0 < noise[1] < noise[4] < 0.1  # linear: 0.02 per step
    assert noise[1] == pytest.approx(0.02)
    # an HWA phase on top of the digital supernet: digital until hwa_start, then the ramp
    phase = replace(cfg, hwa_start=4, hwa_ramp=0.5)
    assert [hwa_noise_at(phase, s) for s in range(5)] == [0.0] * 5
    assert hwa_noise_at(phase, 7) == pytest.approx(0.1) and hwa_noise_at(phase, 5) > 0
    assert hwa_noise_at(replace(cfg, hwa_ramp=0.0), 0) == 0.1  # no ramp: full noise at once
    assert all(hwa_noise_at(replace(cfg, hwa_noise=0.0), s) == 0.0 for s in range(10))


def _tiny_net():
    torch.manual_seed(0)
    return build_supernet("mbconv", in_chans=1, num_classes=10, img_size=28).train()


def test_the_teacher_sees_no_noise():
    net, cfg = _tiny_net(), replace(CFG, k=1)
    seen: list[float] = []
    net.register_forward_pre_hook(lambda module, args: seen.append(module.weight_noise))
    net.weight_noise = 0.3
    x, y = torch.randn(4, 1, 28, 28), torch.tensor([0, 1, 2, 3])
    torch.manual_seed(1)
    losses = sandwich_step(net, x, y, cfg, random.Random(5))
    assert seen == [0.0, 0.3, 0.3] and net.weight_noise == 0.3  # largest, smallest, 1 random
    # the teacher's loss is the noise-free largest sub-network's, whatever the noise
    net.weight_noise = 0.0
    net.activate(next(iter(net.sandwich(random.Random(5), cfg.k))))
    assert losses[0] == pytest.approx(F.cross_entropy(net(x), y).item(), rel=1e-6)


def test_clipping_is_per_channel_and_hwa_only():
    net = _tiny_net()
    w = net.params["blocks~0~0~conv_pw~weight"]  # (144, 24, 1, 1)
    with torch.no_grad():
        w[3, 0, 0, 0] = 50.0  # one outlier in channel 3
    before = w.detach().clone()
    clip_bank(net, replace(CFG, hwa_noise=0.0), step=0)  # a digital supernet is untouched
    assert torch.equal(w, before)
    clip_bank(net, CFG, step=0)
    bound = 3.0 * before.flatten(1).std(1)
    assert bound[3] < 50.0 and w[3, 0, 0, 0].item() == pytest.approx(bound[3].item())
    assert torch.equal(w[[0, 1, 2]], before[[0, 1, 2]])  # the other channels keep theirs
    assert (w.flatten(1).abs().amax(1) <= bound + 1e-6).all()


def test_every_step_clips_after_the_update(tmp_path, monkeypatch):
    import hwnas.train.supernet as recipe

    calls: list[tuple[int, float]] = []
    real = recipe.clip_bank

    def spy(net, cfg, step):  # noqa: ANN001, ANN202
        calls.append((step, net.weight_noise))
        real(net, cfg, step)

    monkeypatch.setattr(recipe, "clip_bank", spy)
    cfg = replace(CFG, steps=2)
    train_supernet(cfg, tmp_path / "c.pt", build=build_supernet)
    assert calls == [(0, 0.0), (1, hwa_noise_at(cfg, 1))] and calls[1][1] > 0


def test_bad_hwa_recipe_lists_every_problem():
    with pytest.raises(ConfigError) as err:
        SupernetTrainConfig(space="resnet", steps=10, hwa_start=10, hwa_ramp=2.0,
                            hwa_clip_sigma=0.0)
    assert len(err.value.problems) == 3


def test_a_digital_checkpoint_without_the_hwa_keys_resumes(tmp_path):
    old = {k: v for k, v in vars(replace(CFG, hwa_noise=0.0)).items()
           if k not in ("hwa_start", "hwa_ramp", "hwa_clip_sigma")}
    check_same_config(old, vars(replace(CFG, hwa_noise=0.0)), tmp_path)
    with pytest.raises(ConfigError, match="hwa_ramp must match"):
        check_same_config({**old, "hwa_noise": 0.05}, vars(CFG), tmp_path)
