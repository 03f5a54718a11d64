"""aihwkit's inference features as hardware options (``analog.inference_options``).

Each option is checked three ways: it parses and sweeps like the other options, a value or a
model that cannot take it is a ``ConfigError`` naming the rule, and it changes the result. Where
the fast path emulates it (drift compensation, converters, noise model, static IR drop), the
fast path agrees with aihwkit's own tile: device weights bit for bit under one torch seed, and
outputs or accuracy in distribution; where it does not (output-noise variation, time-dependent
IR drop), evaluation runs on aihwkit's tile and says so.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import analog
from analog.fast import FastAnalogModel, fast_unsupported
from analog.sweep import parse_sweeps
from hwnas.common.errors import ConfigError

DAY = 86400.0
EMULATED = [{"drift_comp": "column"}, {"drift_comp": "exact"}, {"converter": "dual:1/3"},
            {"converter": "pairs:1/2/4"}, {"noise_model": "state_independent"},
            {"noise_model": "state_independent", "converter": "dual:1/2"},
            {"converter": {"f_lst": [1.0], "g_lst": [[2, 2, 2, 13.5, 25], [25, 13.5, 2, 2, 2]]}}]
"""Options the fast path emulates; the last is a custom pair with a 2 uS floor."""


def _ids(options: dict) -> str:
    return "+".join(v if isinstance(v, str) else "custom" for v in options.values())


def test_every_option_sweeps():
    sweeps = parse_sweeps(["drift_comp=global,column,exact", "converter=single,dual:1/3",
                           "noise_model=pcm,state_independent", "out_noise_std=0,0.5",
                           "ir_drop=0,1", "ir_drop_t=1"])
    assert sweeps["converter"] == ["single", "dual:1/3"]
    assert sweeps["out_noise_std"] == [0.0, 0.5] and sweeps["ir_drop_t"] == [1.0]
    for name, values in sweeps.items():
        for value in values:
            analog.get_hw("pcm").rpu_config(**{name: value})


@pytest.mark.parametrize(("options", "rule"), [
    ({"drift_comp": "percolumn"}, "drift_comp must be one of"),
    ({"drift_comp": ["column"]}, "drift_comp must be one of"),
    ({"converter": "dual:1"}, "converter must be single, dual"),
    ({"converter": "pairs:1/0"}, "factors > 0"),
    ({"converter": "quad"}, "converter must be"),
    ({"noise_model": "hermes2"}, "noise_model must be one of"),
    ({"out_noise_std": -0.1}, "out_noise_std must be a number >= 0"),
    ({"ir_drop": "high"}, "ir_drop must be a number >= 0"),
    ({"ir_drop": 1.0, "ir_drop_t": 1.0}, "two models of one IR drop"),
    ({"converter": {"f_lst": [1.0], "g_lst": [[25, 2, 2], [2, 2, 25]]}}, "not an invertible"),
    ({"converter": {"f_lst": [1.0, 2.0], "g_lst": [[2, 25], [25, 2]]}}, "one value in f_lst"),
    ({"converter": {"f_lst": [1.0]}}, "exactly the keys f_lst and g_lst"),
    ({"converter": {"f_lst": [1.0], "g_lst": [[2, 25], [25, 2]]}, "g_max": 20.0},
     "g_max cannot rescale a custom converter"),
])
def test_bad_values_are_errors(options, rule):
    with pytest.raises(ConfigError, match=rule) as err:
        analog.get_hw("pcm").rpu_config(**options)
    problem = err.value.problems[0]
    assert problem.fix and problem.value is not None


@pytest.mark.parametrize(("name", "options", "rule"), [
    ("reram_cmo", {"converter": "dual:1/3"}, "maps a weight with SingleDevice"),
    ("pcm", {"drift_comp": "column", "compensation": False}, "needs drift compensation on"),
    ("pcm", {"out_noise_std": 0.3, "out_noise": 0.0}, "fraction of out_noise"),
    ("pcm_ideal", {"out_noise_std": 0.3}, "fraction of out_noise"),
    ("pcm", {"out_noise_std": 0.3, "tile": "torch"}, "torch tile ignores the value"),
    ("pcm_ideal", {"ir_drop": 1.0}, "periphery that is not perfect"),
    ("pcm", {"ir_drop_t": 1.0, "tile": "cpp"}, "not its C\\+\\+ tile"),
    ("pcm_hwa", {"ir_drop_t": 1.0}, "w_noise not supported"),
])
def test_an_option_the_model_cannot_apply_is_an_error(name, options, rule):
    with pytest.raises(ConfigError, match=rule):
        analog.get_hw(name).rpu_config(**options)


def test_options_are_recorded():
    config = analog.get_hw("pcm").describe(drift_comp="exact", converter="pairs:1/2/4",
                                           noise_model="state_independent", ir_drop_t=2.0)
    assert config["drift_compensation"] == "GlobalDriftCompensationWithExactReference"
    assert config["noise_model"]["class"] == "StateIndependentNoiseModel"
    assert config["noise_model"]["g_converter"] == (
        "NPairConductanceConverter(f=[1.0, 2.0, 4.0], g_min=0.0, g_max=25.0)")
    assert config["rpu_config"] == "TorchInferenceRPUConfigIRDropT" and config["ir_drop"] == 2.0
    assert analog.get_hw("pcm").describe(out_noise_std=0.2)["out_noise_std"] == 0.2


def test_custom_converter_maps_weights_through_its_table():
    spec = {"f_lst": [1.0], "g_lst": [[2, 2, 2, 13.5, 25], [25, 13.5, 2, 2, 2]]}
    conv = analog.get_hw("pcm").rpu_config(converter=spec).noise_model.g_converter
    g_plus, g_minus = conv.convert_to_conductances(torch.tensor([-1.0, 0.0, 0.5, 1.0]))[0]
    torch.testing.assert_close(g_plus, torch.tensor([2.0, 2.0, 13.5, 25.0]))
    torch.testing.assert_close(g_minus, torch.tensor([25.0, 2.0, 2.0, 2.0]))


def test_g_max_reaches_a_swapped_converter():
    noise = analog.get_hw("pcm").rpu_config(converter="dual:1/3", g_max=10.0).noise_model
    assert noise.g_converter.f_lst == [1.0, 3.0] and noise.g_converter.g_max == 10.0


def _pair(model: nn.Module, **opts):
    rpu = analog.get_hw("pcm").rpu_config(**opts)
    assert fast_unsupported(model, rpu) == []
    return analog.apply(model, "pcm", **opts), FastAnalogModel(model, rpu)


def _program(ref, fast, seed: int, t: float) -> None:
    for model in (ref, fast):
        torch.manual_seed(seed)
        model.program_analog_weights()
        model.drift_analog_weights(t)


@pytest.mark.parametrize("options", EMULATED, ids=_ids)
def test_fast_path_matches_aihwkit_tile(options, trained_cnn, digits):
    """Output noise off: the device weights are aihwkit's bit for bit (same torch seed), the
    compensation factors agree, and the outputs agree up to float summation order."""
    ref, fast = _pair(trained_cnn, out_noise=0.0, **options)
    x = digits.x_test[:100]
    _program(ref, fast, seed=3, t=DAY)
    for rt, ft in zip(ref.analog_tiles(), fast.tiles(), strict=True):
        assert torch.equal(torch.as_tensor(rt.tile.get_weights()), ft.weight)
        torch.testing.assert_close(torch.as_tensor(rt.alpha).reshape(-1).float(),
                                   torch.as_tensor(ft.alpha).reshape(-1).float(), rtol=1e-5,
                                   atol=0)
    with torch.no_grad():
        a, b = ref(x), fast(x)
    assert (a - b).abs().gt(1e-3).any(1).float().mean() <= 0.05
    assert (a.argmax(1) == b.argmax(1)).float().mean() >= 0.98


@pytest.mark.parametrize("options", EMULATED, ids=_ids)
def test_each_option_changes_the_result(options, trained_cnn, digits):
    """Same seed, same programmings: with the option the device weights or the compensation
    differ from the preset's."""
    base, other = FastAnalogModel(trained_cnn, analog.get_hw("pcm").rpu_config()), \
        FastAnalogModel(trained_cnn, analog.get_hw("pcm").rpu_config(**options))
    _program(base, other, seed=4, t=DAY)
    moved = [not torch.equal(a.effective_weight(), b.effective_weight())
             for a, b in zip(base.tiles(), other.tiles(), strict=True)]
    assert all(moved)


def test_per_column_compensation_differs_per_column(trained_cnn):
    fast = FastAnalogModel(trained_cnn, analog.get_hw("pcm").rpu_config(drift_comp="column"))
    _program(fast, fast, seed=0, t=DAY)
    alpha = fast.tiles()[0].alpha
    assert alpha.numel() == 16 and float(alpha.std()) > 0  # one factor per output


def test_exact_reference_reads_the_unprogrammed_weights(trained_cnn):
    """aihwkit's exact reference is mean |W| of the mapped weights, whatever the noise."""
    fast = FastAnalogModel(trained_cnn, analog.get_hw("pcm").rpu_config(drift_comp="exact"))
    _program(fast, fast, seed=0, t=0.0)
    tile = fast.tiles()[0]
    assert float(tile.baseline) == pytest.approx(float(tile.reference.abs().mean()), rel=1e-6)


def test_options_agree_with_aihwkit_in_distribution(trained_cnn, digits, repeat_accs, stats,
                                                    gaps):
    """Full noise (output noise 0.06): accuracy over 5 repeats at 1 day, fast path against
    aihwkit's tile under other seeds, within Welch's bound + 1 pt."""
    welch_gap, _ = gaps
    opts = {"drift_comp": "column", "converter": "dual:1/3", "noise_model": "state_independent",
            "ir_drop": 1.0}
    ref, fast = _pair(trained_cnn, **opts)
    x, y = digits.x_test[:200], digits.y_test[:200]
    ref_accs = repeat_accs(ref, x, y, 0, 5, (DAY,))[0]
    fast_accs = repeat_accs(fast, x, y, 1, 5, (DAY,))[0]
    assert abs(stats(ref_accs)[0] - stats(fast_accs)[0]) <= welch_gap(ref_accs, fast_accs) + 0.01


def test_static_ir_drop_matches_aihwkit_and_moves_outputs():
    torch.manual_seed(0)
    layer = nn.Sequential(nn.Linear(256, 32))
    x = torch.rand(200, 256)
    quiet = {"out_noise": 0.0, "prog_noise_scale": 0.0, "read_noise_scale": 0.0,
             "drift_scale": 0.0}
    ref, fast = _pair(layer, ir_drop=2.0, **quiet)
    _, plain = _pair(layer, **quiet)
    with torch.no_grad():
        a, b, c = ref(x), fast(x), plain(x)
    torch.testing.assert_close(a, b, atol=2e-3, rtol=1e-3)
    assert (b - c).abs().mean() > 10 * (a - b).abs().mean()  # the drop is seen, and alike


def test_out_noise_std_runs_on_aihwkit_and_varies_the_noise_per_output():
    """The fast path does not emulate it, so evaluation uses aihwkit's tile; there the output
    noise's std differs from output to output (about out_noise everywhere without it)."""
    torch.manual_seed(0)
    layer = nn.Sequential(nn.Linear(16, 64))
    assert "forward.out_noise_std (per-output noise)" in fast_unsupported(
        layer, analog.get_hw("pcm").rpu_config(out_noise_std=0.8))
    x = torch.rand(1, 16).expand(400, 16)
    spread = []
    for value in (0.0, 0.8):
        tiles = analog.apply(layer, "pcm", out_noise=0.2, out_noise_std=value)
        with torch.no_grad():
            per_output = tiles(x).std(0)  # the same input 400 times: only output noise moves
        spread.append(float(per_output.std() / per_output.mean()))
    assert spread[0] < 0.15 < 0.3 < spread[1]


def test_fallback_is_said_and_recorded(make_cnn):
    x, y = torch.randn(8, 1, 8, 8), torch.zeros(8).long()
    with pytest.warns(analog.FastPathWarning, match="out_noise_std"):
        res = analog.evaluate(make_cnn().eval(), x, y, "pcm", options={"out_noise_std": 0.5})
    assert res.path == "aihwkit" and res.hw_config["out_noise_std"] == 0.5


def test_time_dependent_ir_drop_runs_on_aihwkit_and_moves_outputs():
    """aihwkit's IR-drop tile (torch, so the torch seed fixes its noise): the fast path refuses
    it, and switching the drop on moves the outputs away from the ideal product."""
    torch.manual_seed(0)
    layer = nn.Sequential(nn.Linear(64, 16))
    x = torch.rand(20, 64)
    quiet = {"out_noise": 0.0, "prog_noise_scale": 0.0, "read_noise_scale": 0.0,
             "drift_scale": 0.0, "tile_size": 64}
    rpu = analog.get_hw("pcm").rpu_config(ir_drop_t=1.0, **quiet)
    assert any("ir_drop_t" in r for r in fast_unsupported(layer, rpu))
    errors = []
    for value in (0.0, 1.0):
        tiles = analog.apply(layer, "pcm", ir_drop_t=value, **quiet)
        with torch.no_grad():
            errors.append(float((tiles(x) - layer(x)).abs().mean()))
    assert errors[1] > 2 * errors[0]


def test_output_mean_and_spread_agree_with_aihwkit():
    """One input through a 64x32 layer, 24 programmings per path (other seeds), 1 day: the
    outputs' mean over programmings within 5 standard errors of the difference at every output
    (aihwkit against itself under these seeds reaches 3.4) and their spread within 25 % of
    aihwkit's (a model without the converter is 61 % off, one without the noise model 73 %)."""
    torch.manual_seed(0)
    layer = nn.Sequential(nn.Linear(64, 32))
    x = torch.rand(1, 64)
    opts = {"drift_comp": "column", "converter": "pairs:1/2/4",
            "noise_model": "state_independent", "ir_drop": 1.0}
    ref, fast = _pair(layer, **opts)
    samples = []
    for seed0, model in ((0, ref), (100, fast)):
        outs = []
        for seed in range(seed0, seed0 + 24):
            _program(model, model, seed=seed, t=DAY)
            with torch.no_grad():
                outs.append(model(x)[0])
        samples.append(torch.stack(outs))
    (m_r, s_r), (m_f, s_f) = [(s.mean(0), s.std(0)) for s in samples]
    se = ((s_r**2 + s_f**2) / 24).sqrt()
    assert bool(((m_r - m_f).abs() <= 5 * se + 1e-3).all())
    assert float(s_f.mean() / s_r.mean()) == pytest.approx(1.0, abs=0.25)


def test_a_study_takes_the_options_and_refuses_what_its_model_cannot_apply():
    from nas.study.config import validate_study
    from nas.study.files import find_study, read_yaml

    raw = read_yaml(find_study("quickstart"))
    hw = raw["objectives"][0]["hw"]  # the model it scores (pcm_static)
    custom = {"f_lst": [1.0], "g_lst": [[2, 2, 25], [25, 2, 2]]}
    raw.setdefault("hw_eval", {})["options"] = {hw: {"drift_comp": "column",
                                                     "converter": custom}}
    assert validate_study(raw).hw_eval.options[hw]["converter"] == custom
    raw["hw_eval"]["options"] = {hw: {"out_noise_std": 0.5, "tile": "torch"}}
    with pytest.raises(ConfigError, match=rf"hw_eval\.options\.{hw}.*out_noise_std needs"):
        validate_study(raw)
    # options for a model the study no longer scores (pcm, before pcm_static) are named
    raw["hw_eval"]["options"] = {"pcm": {"adc_bits": 8}}
    with pytest.raises(ConfigError, match=rf"options\.pcm: must name .*scores \(\['{hw}'\]\)"):
        validate_study(raw)


def test_time_dependent_ir_drop_refuses_layers_its_tile_cannot_run(make_cnn):
    """aihwkit 1.2's IR-drop tile fails inside on 3-D inputs (conv patches, token sequences):
    evaluation names those layers instead, and runs once they are kept digital."""
    model = nn.Sequential(make_cnn(), nn.Linear(10, 4)).eval()
    x, y = torch.randn(4, 1, 8, 8), torch.zeros(4).long()
    with pytest.raises(ConfigError, match=r"2-D inputs only.*\['0\.0', '0\.3'\]"):
        analog.evaluate(model, x, y, "pcm", options={"ir_drop_t": 1.0, "tile_size": 16})
    with pytest.warns(analog.FastPathWarning, match="ir_drop_t"):
        res = analog.evaluate(model, x, y, "pcm", options={"ir_drop_t": 1.0, "tile_size": 16},
                              digital=["0.0", "0.3"])
    assert res.path == "aihwkit" and res.hw_config["rpu_config"] == (
        "TorchInferenceRPUConfigIRDropT")
