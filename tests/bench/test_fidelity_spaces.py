"""The fidelity bench ranks each truth space on its own: an mbconv truth gets its own table, its
recipes run as mbconv studies, and no resnet arch leaks into it (or the other way)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bench.fidelity import measures as fm
from bench.fidelity import recipes, report
from bench.fidelity.truth import space_of
from nas.study.config import validate_study

RN = [f"rn:s16-d1r1c{w}" for w in (16, 24, 32, 48, 64)]
MB = [f"mb:re-s8-k3e{e}c16d1-k3e1c24d1-k3e1c40d1-k3e1c80d1-k3e1c96d1" for e in (1, 3, 4, 6)]


def _frames(seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    archs = RN + MB
    params = rng.integers(10_000, 900_000, len(archs)).astype(float)
    acc = 0.6 + 0.3 * rng.random(len(archs))
    truth = pd.DataFrame({"space": [space_of(a) for a in archs], "arch": archs, "seed": 0,
                          "recipe": "digital", "params": params, "acc_pcm@1d": acc})
    base = pd.DataFrame({"space": truth.space, "arch": archs, "seed": 1, "params": params,
                         "macs": params * 50, "latency_ms": 1.0 + 3.0 * rng.random(len(archs)),
                         "synflow": rng.random(len(archs)), "synflow_s": 0.1,
                         "naswot": rng.random(len(archs)), "naswot_s": 0.1})
    scores = pd.DataFrame([{"recipe": "default", "seed": s, "arch": a,
                            "acc_digital": 0.9, "acc": x + 0.02 * rng.standard_normal(),
                            "acc_se": 0.01, "acc_std": 0.02, "repeats": 3, "images": 500,
                            "seconds": 50.0, "train_seconds": 40.0, "hwa_seconds": 0.0,
                            "train_loss_sum": -x}
                           for s in (1, 2) for a, x in zip(archs, acc, strict=True)])
    return truth, scores, base


def test_an_arch_strings_tag_names_its_space() -> None:
    assert [space_of(a) for a in (RN[0], MB[0])] == ["resnet", "mbconv"]
    with pytest.raises(ValueError, match="tag 'vit'"):
        space_of("vit:e64-d4")


@pytest.mark.parametrize("space", ["resnet", "mbconv"])
def test_a_recipe_runs_as_a_study_of_the_archs_space(space: str) -> None:
    cfg = validate_study(recipes.study("default", 1, space))
    assert cfg.space == space and cfg.seed == 1


@pytest.mark.parametrize("space, archs", [("resnet", RN), ("mbconv", MB)])
def test_each_space_is_ranked_on_its_own_archs(space: str, archs: list[str]) -> None:
    truth, scores, base = _frames()
    table = {r["scorer"]: r for r in report.rows(truth, scores, 0, None, base, space)}
    assert {r["archs"] for r in table.values()} == {len(archs)}
    mine = truth.set_index("arch").loc[archs]
    want = fm.tau(np.log(mine.params.values), mine["acc_pcm@1d"].values)
    assert table["params"]["tau"] == pytest.approx(want)
    got = scores[(scores.seed == 1)].set_index("arch").acc.loc[archs].values
    assert table["default seed 1"]["tau"] == pytest.approx(fm.tau(got, mine["acc_pcm@1d"].values))


def test_a_space_gets_its_table_once_its_truth_has_enough_archs() -> None:
    truth, scores, base = _frames()
    few = truth[~truth.arch.isin(MB[2:])]
    one_seed = truth.assign(seed=0)
    line = report._other_spaces(few, scores, 0, None, base, one_seed)
    assert "mbconv: 2 of its" in line and "###" not in line
    table = report._other_spaces(truth, scores, 0, None, base, one_seed)
    assert "### mbconv" in table and "4 of its" in table and "| params |" in table
    assert "noiseless score" not in table  # no second truth seed: no ceiling to draw


def _two_seeds(truth: pd.DataFrame, gap: float) -> pd.DataFrame:
    """resnet's archs under a second seed whose values differ by +-gap, alternately."""
    rn = truth[(truth.space == "resnet") & (truth.recipe == "digital")]
    other = rn.assign(seed=1)
    other["acc_pcm@1d"] += [gap if i % 2 else -gap for i in range(len(other))]
    return pd.concat([rn.assign(seed=0), other])


def test_another_space_gets_the_ceiling_of_resnets_measured_seed_noise() -> None:
    truth, scores, base = _frames()
    held = truth[(truth.space == "mbconv") & (truth.recipe == "digital")]
    n = int(((truth.space == "resnet") & (truth.recipe == "digital")).sum())
    gaps = np.array([0.01 if i % 2 else -0.01 for i in range(n)])
    want = 100 * np.std(gaps, ddof=1) / np.sqrt(2)
    text = report._space_ceiling(held, _two_seeds(truth, 0.01))
    assert f"training-seed noise of {want:.2f} pt" in text and "no second truth seed" in text
    assert "would reach tau 1.00" in report._space_ceiling(held, _two_seeds(truth, 0.0))
    table = report._other_spaces(truth, scores, 0, None, base, _two_seeds(truth, 0.01))
    assert table.endswith(text)


def test_the_hwa_recipes_are_ranked_against_the_hwa_truth() -> None:
    truth, scores, base = _frames()
    assert "HWA-trained and scored so far: 0;" in report._hwa_truth_text(truth, scores, 0, None,
                                                                      base)
    rng = np.random.default_rng(1)
    hwa = truth[truth.space == "resnet"].assign(recipe="hwa", base_device=None)
    hwa["acc_pcm@1d"] = rng.permutation(hwa["acc_pcm@1d"].values)  # another order than digital
    text = report._hwa_truth_text(pd.concat([truth, hwa]), scores, 0, None, base)
    assert "### Against the HWA truth" in text and "5 resnet archs" in text
    got = scores[scores.seed == 1].set_index("arch").acc.loc[RN].values
    want = fm.tau(got, hwa.set_index("arch")["acc_pcm@1d"].loc[RN].values)
    digital = fm.tau(got, truth.set_index("arch")["acc_pcm@1d"].loc[RN].values)
    assert abs(want - digital) > 0.1  # the two columns rank differently here
    row = next(line for line in text.splitlines() if line.startswith("| default seed 1 |"))
    tau = float(row.split("|")[4])  # columns: scorer, kind, archs, tau, ...
    assert tau == pytest.approx(want, abs=0.01)  # against the HWA column, not the digital one


def test_the_hwa_gain_is_the_gap_to_the_same_arch_trained_digitally() -> None:
    cols = {"acc_digital": (0.87, 0.81), "acc_pcm@1d": (0.82, 0.83),
            "acc_pcm@1d_se": (0.004, 0.003), "acc_pcm@30d": (0.80, 0.82),
            "acc_pcm@30d_se": (0.006, 0.005),
            "acc_pcm_static@1d": (np.nan, 0.79), "acc_pcm_static@1d_se": (np.nan, 0.005)}
    truth = pd.DataFrame({"space": "resnet", "arch": RN[0], "seed": 0,
                          "recipe": ["digital", "hwa"], "params": 12_714.0,
                          **{k: list(v) for k, v in cols.items()}})
    other = truth.iloc[:1].assign(arch=RN[1])  # digitally trained only: no row
    text = report._hwa_gain_text(pd.concat([truth, other]))
    row = next(line for line in text.splitlines() if line.startswith(f"| {RN[0]} |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[3] == "+1.00 +- 0.50"  # 83 - 82 pt, hypot(0.4, 0.3)
    assert cells[5].startswith("+2.00 +- 0.78")
    assert cells[7] == "n/a"  # the digital truth predates the column
    assert cells[8] == "-6.00"
    assert RN[1] not in text
    assert report._hwa_gain_text(other) == ""


def test_the_static_section_ranks_against_the_pcm_static_column() -> None:
    truth, scores, base = _frames()
    assert report._static_truth_text(truth, scores, 0, None, base) == ""  # no such column yet
    rng = np.random.default_rng(2)
    rn = truth.space == "resnet"
    truth.loc[rn, "acc_pcm_static@1d"] = rng.permutation(truth.loc[rn, "acc_pcm@1d"].values)
    static = scores[scores.seed == 1].assign(recipe="default_static")
    text = report._static_truth_text(truth, pd.concat([scores, static]), 0, None, base)
    assert "### Against the pcm_static truth" in text and "The 5 resnet truth archs" in text
    col = truth.set_index("arch")["acc_pcm_static@1d"].loc[RN].values
    got = static.set_index("arch").acc.loc[RN].values

    def tau_of(prefix: str) -> float:
        row = next(line for line in text.splitlines() if line.startswith(f"| {prefix}"))
        return float(row.split("|")[4])

    assert tau_of("default_static seed 1") == pytest.approx(fm.tau(got, col), abs=0.01)
    want = fm.tau(base[base.seed == 1].set_index("arch").params.loc[RN].values, col)
    assert tau_of("params |") == pytest.approx(want, abs=0.01)
    assert "rank mean" not in text and "TSE" not in text
