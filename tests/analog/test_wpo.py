"""Weight-programming optimisation: aihwkit's optimiser, seeded, its table scored as the
device's converter option, and drawn in the report paired against the device."""

from __future__ import annotations

import pytest

from analog import evaluate
from analog.protocol import ScoringProtocol
from analog.report_run import ReportConfig, run_report
from analog.wpo import WpoSettings, optimize_programming, unitless_weights
from hwnas.common.errors import ConfigError

TINY = WpoSettings(popsize=1, maxiter=1, baseline_iterations=2)
# the single-pair converter written as a table: w = -1 -> (0, g_max), 0 -> (0, 0), 1 -> (g_max, 0)
OWN_TABLE = {"converter": {"f_lst": [1.0], "g_lst": [[0.0, 0.0, 25.0], [25.0, 0.0, 0.0]]}}


def _accs(model, digits, options):
    protocol = ScoringProtocol(times=("1d",), repeats=2, seed=0, options=options, adabs=0)
    return evaluate(model, digits.x_test[:300], digits.y_test[:300], "pcm_static", protocol,
                    calib=digits.x_train[:256]).accs


def test_seeded_search_and_its_table_reaches_the_scoring(trained_cnn, digits):
    """One seed repeats the search; the device's own programming written as a table scores
    exactly as the device, and the optimised table programs other conductances."""
    first = optimize_programming(trained_cnn, "pcm_static", [86400.0], TINY)
    again = optimize_programming(trained_cnn, "pcm_static", [86400.0], TINY)
    assert first.options == again.options and first.optimized_tnmse == again.optimized_tnmse
    assert first.beats_baseline == (first.optimized_tnmse < first.baseline_tnmse)
    table = first.options["converter"]
    assert table["f_lst"] == [1.0] and len(table["g_lst"]) == 2
    assert all(0.0 <= g <= 25.0 for row in table["g_lst"] for g in row)
    base = _accs(trained_cnn, digits, None)
    assert _accs(trained_cnn, digits, OWN_TABLE) == base
    assert _accs(trained_cnn, digits, first.options) != base


def test_unitless_weights_are_the_mapped_weights(trained_cnn):
    """Column-wise omega 1: every output row's largest weight is +-1, as the tiles hold it."""
    from analog import get_hw

    w = unitless_weights(trained_cnn, get_hw("pcm_static").rpu_config())
    assert w.abs().max() == pytest.approx(1.0)
    n = sum(m.weight.numel() for m in trained_cnn.modules() if hasattr(m, "weight")
            and m.weight.dim() in (2, 4))
    assert len(w) == n
    kept = unitless_weights(trained_cnn, get_hw("pcm_static").rpu_config(), digital=["0"])
    assert len(kept) == n - trained_cnn[0].weight.numel()


def test_bad_input(trained_cnn):
    with pytest.raises(ConfigError, match="conductance pairs.*reram_cmo"):
        optimize_programming(trained_cnn, "reram_cmo", [1.0], TINY)
    with pytest.raises(ConfigError, match="popsize"):
        WpoSettings(popsize=0)


def test_report_draws_the_optimised_programming_paired(trained_cnn, digits, tmp_path):
    from analog.report_html import write_report

    cfg = ReportConfig(hw=("pcm_static",), times=("1d",), repeats=2, images=300, adabs=0,
                       sensitivity=False, wpo=TINY)
    res = run_report(trained_cnn, digits, cfg, log=lambda line: None)
    assert set(res.curves) == {"pcm_static", "pcm_static+wpo"}
    (diff,) = res.paired["pcm_static+wpo"]
    assert diff["against"] == "pcm_static"
    own, wpo = (_accs(trained_cnn, digits, o) for o in (None, res.wpo[0].options))
    assert res.curves["pcm_static"]["no_adabs"].accs == own
    assert res.curves["pcm_static+wpo"]["no_adabs"].accs == wpo
    pairs = zip(own[0], wpo[0], strict=True)
    assert diff["mean"] == pytest.approx(sum(b - a for a, b in pairs) / 2)
    paths = write_report(res.as_dict() | {"coverage": {"shares": {}, "layers": []}}, tmp_path,
                         title="t")
    page = paths["html"].read_text()
    assert "pcm_static+wpo" in page and "TNMSE" in page
