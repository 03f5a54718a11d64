"""The analog report: agreement with aihwkit's own drift path, paired seeds, the recommendation,
the chance warning, the files and the conductance export."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
import torch

from analog.report_run import ReportConfig, run_report
from hwnas.common.errors import ConfigError

QUIET = {"log": lambda line: None}


def test_report_agrees_with_aihwkit_own_path(trained_cnn, digits, repeat_accs, gaps):
    """Same model and weights: aihwkit's convert_to_analog, program_analog_weights and
    drift_analog_weights give accuracies the report's curve matches at every drift time."""
    from aihwkit.nn.conversion import convert_to_analog

    from analog import get_hw

    times = ("1s", "1d", "1y")
    cfg = ReportConfig(hw=("pcm",), times=times, repeats=6, images=len(digits.y_test),
                       adabs=0, sensitivity=False)
    curve = run_report(trained_cnn, digits, cfg, **QUIET).curves["pcm"]["no_adabs"]
    analog = convert_to_analog(trained_cnn, get_hw("pcm").rpu_config()).eval()
    ref = repeat_accs(analog, digits.x_test, digits.y_test, 1, 6, [p.t for p in curve.points])
    welch_gap, _ = gaps
    for point, theirs in zip(curve.points, ref, strict=True):
        assert abs(point.acc_mean - np.mean(theirs)) <= welch_gap(point.accs, theirs), point.label


def test_paired_seeds_and_recommendation(trained_cnn, digits):
    """Every device's repeat r is drawn on the same seeds (common random numbers): each curve
    equals analog.evaluate with the report's seed, and the paired differences are theirs; a
    generous budget keeps every layer analog, a budget no model meets grows the
    verified set until the tries or the layers run out."""
    from analog import evaluate

    cfg = ReportConfig(hw=("pcm", "reram_cmo"), times=("1s", "1d"), repeats=2, images=200,
                       adabs=0, sensitivity_images=200, budget=100.0)
    res = run_report(trained_cnn, digits, cfg, **QUIET)
    x, y = digits.x_test[:200], digits.y_test[:200]
    own = {hw: evaluate(trained_cnn, x, y, hw, times=cfg.times, repeats=2, seed=cfg.seed).accs
           for hw in cfg.hw}
    assert all(res.curves[hw]["no_adabs"].accs == own[hw] for hw in cfg.hw)
    assert [d["mean"] for d in res.paired["reram_cmo"]] == pytest.approx(
        [np.mean(np.subtract(b, a)) for a, b in zip(own["pcm"], own["reram_cmo"], strict=True)])
    with pytest.raises(ConfigError, match="distinct"):
        ReportConfig(hw=("pcm", "pcm"))
    assert res.recommendation.digital == [] and res.recommendation.meets_budget
    assert {s.layer for s in res.sensitivity} == {"0", "3", "8"}
    strict = run_report(trained_cnn, digits, ReportConfig(
        hw=("pcm",), times=("1d",), repeats=2, images=200, adabs=0, sensitivity_images=200,
        budget=-100.0, max_verify=2), **QUIET)
    rec = strict.recommendation
    assert not rec.meets_budget and 1 <= len(rec.tries) <= 2
    # the screened run: every loss alone, the gain kept digital of the largest loss only, on
    # the same draws as the full run
    screened = run_report(trained_cnn, digits, ReportConfig(
        hw=("pcm",), times=("1d",), repeats=2, images=200, adabs=0, sensitivity_images=200,
        budget=-100.0, max_verify=1, sensitivity_top=1), **QUIET)
    full = {s.layer: s for s in strict.sensitivity}
    gains = [s for s in screened.sensitivity if s.gain_only_digital is not None]
    assert len(gains) == 1 and len(screened.sensitivity) == 3
    worst = max(full.values(), key=lambda s: s.loss_only_analog.mean)
    assert gains[0].layer == worst.layer == screened.sensitivity[0].layer
    assert gains[0].gain_only_digital == full[worst.layer].gain_only_digital
    assert screened.recommendation.tries[0]["digital"][0] == worst.layer
    # the tries ran out: the set reported is the one measured last, not one grown after it
    assert screened.recommendation.digital == screened.recommendation.tries[-1]["digital"]
    with pytest.raises(ConfigError, match="sensitivity_top"):
        ReportConfig(sensitivity_top=0)
    assert rec.tries[-1]["digital"] == rec.digital and rec.verified_loss == rec.tries[-1]["loss"]
    if len(rec.digital) == 3:  # every layer digital: the digital model, on the same images
        assert rec.verified_loss == pytest.approx(0.0, abs=1e-9)


def test_chance_warning_and_files(make_cnn, digits, tmp_path):
    from analog.report_coverage import coverage_table
    from analog.report_html import write_report

    torch.manual_seed(0)
    model = make_cnn(depthwise=True).eval()
    cfg = ReportConfig(hw=("pcm",), times=("1s",), repeats=1, images=100, adabs=0,
                       sensitivity=False)
    res = run_report(model, digits, cfg, **QUIET)
    assert res.warnings and "chance" in res.warnings[0]
    rep = res.as_dict() | {"coverage": coverage_table(model, digits.x_test[:1])}
    unsupported = [r for r in rep["coverage"]["layers"] if r["status"] == "unsupported"]
    assert [r["layer"] for r in unsupported] == ["3"] and "groups=16" in unsupported[0]["reason"]
    assert sum(v["weight_share"] for v in rep["coverage"]["shares"].values()) == pytest.approx(1)
    paths = write_report(rep, tmp_path, title="t")
    no_bn = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 10))
    one = run_report(no_bn, digits, ReportConfig(hw=("pcm",), times=("1s",), repeats=1,
                                                 images=50, adabs=8, sensitivity=False), **QUIET)
    assert list(one.curves["pcm"]) == ["no_adabs"]  # no batch norm: AdaBS would change nothing
    assert json.loads(paths["json"].read_text())["verdict"].startswith("Do not trust")
    assert "chance" in paths["html"].read_text()
    assert "``" not in paths["html"].read_text()  # docstring markup shown as code


def test_export_round_trip(trained_cnn, digits, tmp_path):
    """On noise-free tiles the exported effective weights are the layer's own weights; on pcm the
    programmed conductances differ from the targets and stay within the device's range."""
    from analog.report_export import export_conductances

    ideal = export_conductances(trained_cnn, "pcm_ideal", ["1s"], tmp_path)
    arrays = np.load(tmp_path / "conductances_pcm_ideal.npz")
    w = trained_cnn[-1].weight.detach().numpy()
    assert np.allclose(arrays["8/tile0/effective@1s"], w, atol=1e-6)
    assert ideal["times"] == ["1s"] and "8/tile0/programmed" in ideal["arrays"]
    man = export_conductances(trained_cnn, "pcm", ["1s", "1d"], tmp_path, seed=3)
    pcm = np.load(tmp_path / "conductances_pcm.npz")
    assert man["seed"] == 3 and man["g_max_uS"] == pytest.approx(25.0)
    assert not np.allclose(pcm["8/tile0/programmed"], pcm["8/tile0/target"])
    assert np.abs(pcm["8/tile0/target"]).max() <= 1 + 1e-6


def test_cli_reports_every_bad_argument_at_once(tmp_path, capsys):
    from nas.cli import main

    code = main(["analog", "report", "--model", "timm:resnet18", "--weights",
                 str(tmp_path / "missing.pt"), "--hw", "pcm,nope", "--repeats", "0",
                 "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "--weights" in err and "nope" in err and "--repeats" in err
    assert not (tmp_path / "out").exists()


def test_sensitivity_ranks_on_one_calibration_and_verifies_on_its_own(trained_cnn, digits):
    """The 2 evaluations per layer share the all-analog model's static input ranges (one
    calibration); the all-analog score and the verified recommendation calibrate for their own
    digital set, as ``analog.evaluate`` does."""
    from analog import evaluate
    from analog.input_ranges import has_learned_input_ranges, learned_input_ranges
    from analog.report_run import _Scorer
    from analog.static_io import quantile_ranges

    cfg = ReportConfig(hw=("pcm_static",), sensitivity_time="1d", sensitivity_images=100,
                       sensitivity_repeats=2, adabs=0)
    s = _Scorer(trained_cnn, digits, cfg, log=lambda _: None)
    x, y, calib = digits.x_test[:100], digits.y_test[:100], digits.x_train[:cfg.calib_size]

    def own(model, digital):
        return evaluate(model, x, y, "pcm_static", times=("1d",), repeats=2, adabs=0,
                        calib=calib, digital=digital).points[0].acc_mean

    shared = quantile_ranges(trained_cnn, analog_rpu(), calib)
    for digital in ([], ["3"], ["0", "8"]):
        assert s.at(digital, shared=True).est.mean == own(shared, digital)
        assert s.at(digital).est.mean == own(trained_cnn, digital)
    ready = s.ready
    s.at(["3"], shared=True)
    assert s.ready is ready and has_learned_input_ranges(ready)  # calibrated once
    assert not has_learned_input_ranges(trained_cnn)  # the caller's model is untouched
    assert all(bool((learned_input_ranges(a) == learned_input_ranges(b)).all())
               for a, b in zip(ready.modules(), shared.modules(), strict=True)
               if learned_input_ranges(a) is not None)


def analog_rpu():
    import analog

    return analog.get_hw("pcm_static").rpu_config()


def test_sensitivity_losses_start_from_the_digital_model_with_the_same_adabs(trained_cnn, digits,
                                                                             tmp_path):
    # re-estimating the batch norms on a few images moves a digital model's accuracy; that
    # move is not any layer's analog loss, so the losses start from the re-estimated model
    from analog.adabs import recalibrate, training_images
    from analog.report_html import write_report
    from hwnas.train.loop import evaluate

    cfg = ReportConfig(hw=("pcm",), times=("1d",), repeats=1, images=100, adabs=16,
                       sensitivity_images=100, sensitivity_repeats=1, sensitivity_top=1,
                       max_verify=1)
    res = run_report(trained_cnn, digits, cfg, **QUIET)
    ref = copy.deepcopy(trained_cnn)
    recalibrate(ref, training_images(digits.x_train, 16, cfg.seed))
    x, y = digits.x_test[:100], digits.y_test[:100]
    assert res.sensitivity_reference.mean == evaluate(ref.eval(), x, y)["acc"]
    assert res.sensitivity_reference.mean != evaluate(trained_cnn, x, y)["acc"]
    from analog.report_coverage import coverage_table

    rep = res.as_dict() | {"coverage": coverage_table(trained_cnn, digits.x_test[:1])}
    html = write_report(rep, tmp_path, title="t")["html"].read_text()
    assert "re-estimated on the same 16 AdaBS images" in html
    off = run_report(trained_cnn, digits, ReportConfig(
        hw=("pcm",), times=("1d",), repeats=1, images=100, adabs=0, sensitivity_images=100,
        sensitivity_repeats=1, sensitivity_top=1, max_verify=1), **QUIET)
    assert off.sensitivity_reference.mean == evaluate(trained_cnn, x, y)["acc"]


def test_sensitivity_differences_are_paired_image_by_image(trained_cnn, digits):
    """A layer's loss is scored on the reference's images with the same seeds: its SE counts
    only the images the two disagree on, below what two unpaired SEs give; so does the
    verified loss's."""
    from analog.precision import sampling_se

    cfg = ReportConfig(hw=("pcm",), times=("1d",), repeats=2, images=200, adabs=0,
                       sensitivity_images=300, budget=-100.0, max_verify=1)
    res = run_report(trained_cnn, digits, cfg, **QUIET)
    ref = res.sensitivity_reference
    assert ref.se == pytest.approx(sampling_se(ref.mean, 300))
    for layer in res.sensitivity:
        loss = layer.loss_only_analog
        # unpaired, the loss would carry at least both evaluations' image-sampling errors
        unpaired = np.hypot(ref.se, sampling_se(ref.mean - loss.mean, 300))
        assert loss.se < 0.75 * unpaired and loss.repeats == 2, layer.layer
    (only,) = res.recommendation.tries
    assert only["se"] < 100 * 0.75 * np.hypot(ref.se, res.recommendation.verified.se)


def test_paired_estimate_against_brute_force():
    from analog.precision import paired_estimate

    gen = torch.Generator().manual_seed(0)
    a = [torch.rand(50, generator=gen) < 0.7 for _ in range(4)]
    b = [torch.rand(50, generator=gen) < 0.6 for _ in range(4)]
    d = np.array([x.numpy().astype(float) - y.numpy().astype(float) for x, y in zip(a, b,
                                                                                  strict=True)])
    mean, se, std = paired_estimate(a, b)
    assert mean == pytest.approx(d.mean())
    assert std == pytest.approx(d.mean(axis=1).std(ddof=1))
    assert se == pytest.approx(np.sqrt(d.mean(axis=1).var(ddof=1) / 4
                                       + d.mean(axis=0).var(ddof=1) / 50))
    assert paired_estimate(a, a) == (0.0, 0.0, 0.0)
    one = paired_estimate(a, [b[0]])  # a deterministic model: one mask for every repeat
    assert one[0] == pytest.approx(np.mean([x.float().mean() for x in a]) - b[0].float().mean())
    with pytest.raises(ValueError, match="repeats"):
        paired_estimate(a, b[:2])
