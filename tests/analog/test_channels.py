"""Dead channels: a zero weight column under a batch norm reads pure device noise on aihwkit
tiles, amplified by the norm; freezing the norm keeps the digital function and the accuracy."""

from __future__ import annotations

import copy

import pytest
import torch

import analog


def _kill_channel(model, layer: int, norm: int, channel: int, digits):
    """Zero one conv channel and re-estimate the norm statistics, as training would."""
    dead = copy.deepcopy(model)
    with torch.no_grad():
        dead[layer].weight[channel] = 0.0
        if dead[layer].bias is not None:
            dead[layer].bias[channel] = 0.25
        dead[norm].reset_running_stats()
        dead[norm].momentum = None  # cumulative average: exact statistics from one pass
        dead.train()
        dead(digits.x_train)
    return dead.eval()


def test_freezing_keeps_the_digital_function(trained_cnn, digits):
    dead = _kill_channel(trained_cnn, 0, 1, 3, digits)
    assert dead[1].running_var[3] == 0.0
    before = dead(digits.x_test)
    assert analog.freeze_dead_channels(dead) == 1
    assert dead[1].weight[3] == 0.0
    torch.testing.assert_close(dead(digits.x_test), before, rtol=0, atol=1e-5)
    assert analog.freeze_dead_channels(dead) == 0  # idempotent: nothing left to freeze
    torch.testing.assert_close(dead(digits.x_test), before, rtol=0, atol=1e-5)


def test_a_dead_channel_ruins_pcm_until_frozen(trained_cnn, digits):
    x, y = digits.x_test, digits.y_test
    dead = _kill_channel(trained_cnn, 0, 1, 9, digits)  # digital accuracy 0.74-0.84 by seed
    frozen = copy.deepcopy(dead)
    analog.freeze_dead_channels(frozen)

    def pcm(model):
        return analog.evaluate(model, x, y, "pcm", times=("1s",), repeats=3).acc_mean[0]

    digital = analog.evaluate(dead, x, y, "digital").acc_mean[0]
    assert digital > 0.7
    with pytest.warns(analog.DeadChannelWarning, match="1 dead channel"):
        assert pcm(dead) < 0.3  # about chance
    assert analog.dead_channels(dead) == 1 and analog.dead_channels(frozen) == 0
    assert pcm(frozen) > digital - 0.1


def test_live_channels_and_unpaired_layers_are_left_alone(trained_cnn):
    model = copy.deepcopy(trained_cnn)
    state = copy.deepcopy(model.state_dict())
    with torch.no_grad():
        model[-1].weight[2] = 0.0  # the classifier: no norm after it
    state["8.weight"] = model[-1].weight.detach().clone()
    assert analog.freeze_dead_channels(model) == 0
    for key, value in model.state_dict().items():
        assert torch.equal(value, state[key]), key
