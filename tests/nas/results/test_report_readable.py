"""The study report reads as what the run did: its overrides and settings in the header, an
infeasible trial said in words (never an accuracy of 0), a short trial table with every stored
column one click away, where each trial's seconds went, latency bars on the front, and the
explanation of a digital accuracy below the analog one. On the NB201 table study (seconds)."""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pytest
from matplotlib.figure import Figure

import hwnas
from nas.results.plots import _latency_bars
from nas.results.report import write_report
from nas.results.run_settings import digital_below_note
from nas.study.files import load_study


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("report")
    # a budget some cells break: their rows must say so, not show an accuracy
    hwnas.run("nb201_table", n_trials=14, out=out,
              constraints=[{"metric": "latency", "max": 5.0}])
    return write_report(out / "nb201_table").read_text()


def _short_table(page: str) -> str:
    start = page.index("<h2>All trials</h2>")
    return page[start:page.index("<details>", start)]


def test_the_header_says_what_this_run_did(page: str) -> None:
    assert "This run overrode its study file (2 field(s))" in page
    assert "<code>n_trials</code>: 14 (file: 100)" in page
    assert "<code>constraints</code>" in page
    assert "<th>schedule (as run)</th>" in page
    assert "<th>training and scoring (as run)</th><td>none: every metric looked up in" in page


def test_a_trained_study_states_its_training_and_scoring() -> None:
    from nas.results.run_settings import settings_rows

    rows = settings_rows(load_study("quickstart", {"train.epochs": 1, "hw_eval.adabs": 128}))
    assert rows["training (as run)"].startswith("1 epochs on 5,000 train images")
    assert "AdaBS on 128 images" in rows["scoring (as run)"]
    assert rows["schedule (as run)"].startswith("sh, eta 3") and "40 looks" in rows[
        "schedule (as run)"]


def test_an_infeasible_trial_reads_infeasible_never_as_accuracy_zero(page: str) -> None:
    table = _short_table(page)
    columns = re.findall(r"<th>(.*?)</th>", table, re.S)
    acc, lat = columns.index("acc_digital"), columns.index("latency_ms")
    rows = [re.findall(r"<td>(.*?)</td>", r, re.S) for r in re.findall(r"<tr>(.*?)</tr>", table,
                                                                        re.S)]
    bad = [r for r in rows if r and r[acc].startswith("infeasible:")]
    assert bad, "the budget should have rejected some cells"
    for row in bad:  # the reason in words; the latency that broke it, measured, stays a number
        assert "outside latency_ms &lt;= 5" in row[acc] and float(row[lat]) > 5
    good = [r for r in rows if r and r[acc] and not r[acc].startswith("infeasible")]
    assert good and all(0 < float(r[acc].split(" ")[0]) <= 1 for r in good)


def test_the_trial_table_is_short_and_the_rest_one_click_away(page: str) -> None:
    header = re.search(r"<thead>(.*?)</thead>", _short_table(page), re.S).group(1)
    columns = re.findall(r"<th>(.*?)</th>", header, re.S)
    assert len(columns) <= 12
    assert {"s cost", "s train", "s score", "s total"} <= set(columns)
    every = re.search(r"Every stored column \((\d+);", page)
    assert every and int(every.group(1)) > len(columns)


def test_front_points_carry_their_latency_spread() -> None:
    ax = Figure().subplots()
    trials = [SimpleNamespace(user_attrs={"latency_ms": 2.0, "latency_p10_ms": 1.8,
                                          "latency_p90_ms": 2.5, "acc": 0.7})]
    assert _latency_bars(ax, trials, "latency_ms", "acc", "C3")
    segments = ax.collections[-1].get_segments()
    assert np.allclose(segments[0], [[1.8, 0.7], [2.5, 0.7]])
    assert not _latency_bars(ax, trials, "params", "acc", "C3")  # only on a latency axis


def test_digital_below_analog_is_explained_only_beyond_its_noise() -> None:
    cfg = load_study("quickstart")
    key = "acc_pcm_static@1d"

    def front(digital: float) -> SimpleNamespace:
        t = SimpleNamespace(number=3, user_attrs={"acc_digital": digital, key: 0.70,
                                                  f"{key}_se": 0.01})
        return SimpleNamespace(keys=[key, "latency_ms"], trials=[t])

    note = digital_below_note(cfg, front(0.60))
    assert note.startswith("Trial(s) 3:") and "AdaBS" in note
    assert f"{cfg.hw_eval.adabs} training images" in note
    assert digital_below_note(cfg, front(0.69)) == ""  # within 2 SE: nothing to explain
