"""The pure parts of bench.search.sh_equal_time: fronts, hypervolume, arm summaries and the
results table, on hand-made trials and result files (no training)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from optuna.trial import FrozenTrial, TrialState, create_trial

from bench import RESULTS
from bench.search import sh_equal_time as sh
from hwnas.common.errors import ConfigError


def _trial(arch: str, acc: float, lat: float, rung: int | None = None,
           feasible: bool = True, prior: str | None = None) -> FrozenTrial:
    attrs = {"arch": arch, "feasible": feasible, "latency_ms": lat, "train_seconds": 10.0}
    if rung is not None:
        attrs["rung"] = rung
    if prior is not None:
        attrs.update(prior=prior, prior_score=acc)
        attrs.pop("train_seconds")
    return create_trial(state=TrialState.COMPLETE, values=[acc, lat], user_attrs=attrs)


def test_truth_hv_of_hand_made_fronts() -> None:
    # Reference (accuracy 0, 5 ms): one point is a rectangle, two add the part the second adds.
    assert sh.truth_hv([]) == 0.0
    assert sh.truth_hv([(0.6, 1.0)]) == pytest.approx(0.6 * 4.0)
    assert sh.truth_hv([(0.6, 1.0), (0.8, 3.0)]) == pytest.approx(0.6 * 4.0 + 0.2 * 2.0)
    assert sh.truth_hv([(0.6, 1.0), (0.5, 2.0)]) == pytest.approx(0.6 * 4.0)  # dominated


def test_front_keeps_only_non_dominated_trials() -> None:
    pool = [_trial("a", 0.6, 1.0), _trial("b", 0.8, 3.0), _trial("c", 0.5, 2.0)]
    assert [t.user_attrs["arch"] for t in sh.front(pool)] == ["a", "b"]
    assert sh.front([]) == []


def test_summarise_a_scheduled_arm_fronts_its_highest_rung() -> None:
    done = [_trial("a", 0.50, 1.0, rung=0), _trial("a", 0.60, 1.0, rung=1),
            _trial("b", 0.55, 2.0, rung=0), _trial("c", 0.70, 3.0, rung=0),
            _trial("d", 0.90, 0.5, rung=0, feasible=False)]
    arm = sh.summarise("sh", 0, done, wall=12.0)
    assert arm["front_rung"] == 1 and arm["front"] == ["a"] and arm["front_acc"] == [0.60]
    assert arm["feasible_by_rung"] == {0: 3, 1: 1}
    assert (arm["evaluations"], arm["candidates"], arm["trained"]) == (5, 4, 3)
    assert arm["full"] == {}  # nothing reached the top rung: every member is re-trained
    top = sh.summarise("sh", 0, done + [_trial("a", 0.65, 1.0, rung=sh.TOP_RUNG)], 1.0)
    assert top["front"] == ["a"] and top["full"] == {"a": 0.65}


def test_summarise_a_plain_arm_counts_every_feasible_result_as_truth() -> None:
    done = [_trial("a", 0.6, 1.0), _trial("b", 0.8, 3.0), _trial("c", 0.9, 9.0, feasible=False)]
    arm = sh.summarise("plain", 1, done, wall=5.0)
    assert arm["front"] == ["a", "b"] and arm["front_rung"] == 0
    assert arm["full"] == {"a": 0.6, "b": 0.8}
    assert arm["feasible_by_rung"] == {0: 2} and arm["train_s"] == pytest.approx(30.0)


def test_summarise_a_prior_arm_counts_rung_zero_as_looked_at_not_trained() -> None:
    # a free rung-0 trial holds SynFlow where the accuracy goes: never a front member, never
    # a trained candidate, never a truth value
    done = [_trial("a", 31.0, 3.0, rung=0, prior="synflow"),
            _trial("b", 12.0, 1.0, rung=0, prior="synflow"),
            _trial("c", 40.0, 6.0, rung=0, prior="synflow", feasible=False),
            _trial("a", 0.75, 3.0, rung=1)]
    arm = sh.summarise("prior", 0, done, wall=9.0)
    assert arm["front"] == ["a"] and arm["front_acc"] == [0.75] and arm["front_rung"] == 1
    assert (arm["evaluations"], arm["candidates"], arm["rung0_free"], arm["trained"]) == \
        (1, 3, 3, 1)
    assert arm["full"] == {"a": 0.75} and arm["train_s"] == pytest.approx(10.0)


def _arm(name: str, seed: int, trained: int, by_rung: dict, rung: int, hv: float) -> dict:
    return {"arm": name, "seed": seed, "wall_s": 100.4, "evaluations": 5, "candidates": 4,
            "trained": trained, "train_s": 60.6, "feasible_by_rung": by_rung,
            "front_rung": rung, "front": ["rn:x"], "front_acc": [0.5], "truth_acc": [0.7],
            "hv_truth": hv}


RESULT = {"command": "python -m bench.search.sh_equal_time --seconds 9", "note": "hand-made",
          "runs": [_arm("plain", 0, 2, {0: 2}, 0, 2.5), _arm("sh", 0, 6, {0: 5, 1: 1}, 1, 2.75)]}


def test_render_rows_comparison_and_rungs_reached() -> None:
    text = sh.render(RESULT)
    lines = text.splitlines()
    assert lines[0].startswith("| run (seed) | arm | wall s |") and len(lines[0].split("|")) == 14
    assert "| 0 | plain | 100 | 5 | 4 | 2 | 2 (full budget) | 61 | `rn:x` (full budget) |" in text
    assert "| 0 | sh | 100 | 5 | 4 | 6 | rung 0: 5, rung 1: 1 | 61 | `rn:x` (rung 1) |" in text
    assert ("Run 0: successive halving trained 6 candidates against 2 (3.0x) and its "
            "truth-scored front has HV 2.750 against 2.500.") in text
    assert "highest rung any successive-halving arm reached was 1 (the top rung is 2):" in text
    assert "Source: `python -m bench.search.sh_equal_time --seconds 9`; hand-made." in text


def test_render_compares_the_prior_arm_with_plain() -> None:
    prior = {**_arm("prior", 0, 3, {1: 3}, 1, 2.9), "candidates": 10, "rung0_free": 9}
    text = sh.render({**RESULT, "runs": [*RESULT["runs"], prior]})
    assert "| 0 | prior | 100 | 5 | 10 (9) | 3 | 3 (full budget) |" in text
    assert ("Run 0: the free SynFlow rung 0 trained 3 candidates (after looking at 10 for "
            "free) against 2 (1.5x) and its truth-scored front has HV 2.900 against 2.500.") \
        in text


def test_arms_must_include_plain() -> None:
    with pytest.raises(ConfigError, match="include plain"):
        sh.parse(["--arms", "sh,prior"])


def test_render_is_the_same_after_a_json_round_trip() -> None:
    # JSON turns the rung keys into strings; the table must not change with them.
    assert sh.render(json.loads(json.dumps(RESULT))) == sh.render(RESULT)


def test_the_stored_result_file_renders_the_recorded_table() -> None:
    stored = json.loads((RESULTS / "sh_equal_time.json").read_text())
    assert sh.render(stored) in (RESULTS / "sh_equal_time.md").read_text()
    by_seed: dict[int, set[str]] = {}
    for arm in stored["runs"]:
        by_seed.setdefault(arm["seed"], set()).add(arm["arm"])
    assert len(by_seed) >= 3 and all(arms == set(sh.ARMS) for arms in by_seed.values())


def test_render_writes_only_its_marked_block(tmp_path: Path) -> None:
    src, md = tmp_path / "r.json", tmp_path / "r.md"
    src.write_text(json.dumps(RESULT))
    md.write_text("kept above\n\n<!-- sh_equal_time -->\nold\n<!-- /sh_equal_time -->\n\n"
                  "kept below\n")
    sh.main(["--render", "--json", str(src), "--md", str(md)])
    text = md.read_text()
    assert text.startswith("kept above") and text.rstrip().endswith("kept below")
    assert "\nold\n" not in text and sh.render(RESULT) in text


@pytest.mark.parametrize("argv, rule", [
    (["--seeds", "0,x"], "--seeds: seeds must be comma-separated integers"),
    (["--seconds", "0"], "--seconds: the plain arm's timeout must be positive"),
    (["--render", "--json", "/nonexistent/r.json"], "--render: the result file --json must exist"),
])
def test_bad_input_names_the_rule(argv: list[str], rule: str) -> None:
    with pytest.raises(ConfigError, match=rule):
        sh.main(argv)
