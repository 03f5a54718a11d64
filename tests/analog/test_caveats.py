"""Each analog model's caveats sit on its registry entry, are printed by `hwnas analog list` and
are stored with every result; the ReRAM CMO caveat is checked against the device model."""

from __future__ import annotations

import pytest
import torch

import analog
from analog.aimc import AnalogHW

ANALOG = [n for n in analog.list_hw() if analog.get_hw(n).kind == "analog"]


@pytest.mark.parametrize("name", ANALOG)
def test_every_analog_model_states_its_caveats(name):
    hw = analog.get_hw(name)
    assert hw.caveats and all(isinstance(c, str) and len(c) > 20 for c in hw.caveats)
    assert hw.describe()["caveats"] == list(hw.caveats)


def test_caveats_are_printed_and_stored(capsys, trained_cnn, digits):
    from nas.cli import main

    assert main(["analog", "list", "pcm_hermes"]) == 0
    out = capsys.readouterr().out
    assert "caveat: 'two devices per weight'" in out and "four devices per weight" in out
    result = analog.evaluate(trained_cnn, digits.x_test[:50], digits.y_test[:50], "reram_cmo",
                             times=("1d",))
    assert any("common-mode offset" in c for c in result.hw_config["caveats"])


def test_an_entry_can_bring_its_own_caveats():
    own = AnalogHW("my_pcm", "pcm with a note", caveats=("only a test",))
    assert own.describe()["caveats"] == ["only a test"]
    assert AnalogHW("unknown_name", "no built-in caveats").caveats == ()


def test_reram_cmo_offset_survives_a_global_gain():
    """The caveat's claim: relaxation moves every weight by about the same amount, so the best
    single gain (what global drift compensation applies) leaves a mean offset at 1 d."""
    torch.manual_seed(0)
    noise = analog.get_hw("reram_cmo").rpu_config().noise_model
    w = torch.rand(256, 256) * 2 - 1
    w = w / w.abs().amax(1, keepdim=True)  # column-wise omega 1, as mapped
    programmed, nu = noise.apply_programming_noise(w)
    drifted = noise.apply_drift_noise(programmed, nu, 86400.0)
    gain = (drifted * w).sum() / (drifted * drifted).sum()
    offset = float((gain * drifted - w).mean())
    assert -0.035 < offset < -0.015
    assert abs(float((programmed - w).mean())) < 0.002  # programming alone leaves none
