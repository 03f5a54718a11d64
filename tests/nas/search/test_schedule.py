"""Multi-objective successive halving: the promotion rule, rungs, workers sharing a real SQLite
storage, resume after kill -9, bad schedule values.

The multi-process tests run this file as a worker script (``python test_schedule.py worker
...``): a real Optuna study on a real SQLite file, NB201 table metrics degraded at low budgets,
promotions decided by ``nas.search.schedule`` from the storage.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import optuna
import pytest
from optuna.trial import TrialState

REPO = Path(__file__).resolve().parents[3]
SCHED = {"type": "sh", "eta": 3, "min_budget": 1, "max_budget": 9}


# -- the promotion rule against a brute-force reference ------------------------------------------
def _brute_order(values: np.ndarray, dirs: list[str]) -> list[int]:
    loss = values * np.array([-1.0 if d == "maximize" else 1.0 for d in dirs])
    n, m = loss.shape

    def dominates(a: int, b: int) -> bool:
        return bool(np.all(loss[a] <= loss[b]) and np.any(loss[a] < loss[b]))

    rank = {}
    left = set(range(n))
    r = 0
    while left:  # peel fronts by the definition
        front = {i for i in left if not any(dominates(j, i) for j in left)}
        rank.update(dict.fromkeys(front, r))
        left -= front
        r += 1
    crowd = {}
    for r in set(rank.values()):
        members = [i for i in range(n) if rank[i] == r]
        for i in members:
            if len(members) <= 2:
                crowd[i] = np.inf
                continue
            total = 0.0
            for j in range(m):
                srt = sorted(members, key=lambda k: (loss[k, j], k))
                pos = srt.index(i)
                span = loss[srt[-1], j] - loss[srt[0], j]
                if pos in (0, len(srt) - 1):
                    total = np.inf
                elif span > 0 and total != np.inf:
                    total += (loss[srt[pos + 1], j] - loss[srt[pos - 1], j]) / span
            crowd[i] = total
    return sorted(range(n), key=lambda i: (rank[i], -crowd[i], i))


@pytest.mark.parametrize("m,seed", list(itertools.product([2, 3], range(6))))
def test_promotion_order_matches_brute_force(m: int, seed: int) -> None:
    from nas.algorithms.promotion import promotion_order

    rng = np.random.default_rng(seed)
    values = rng.integers(0, 6, size=(25, m)).astype(float)  # coarse grid: ties and duplicates
    dirs = ["maximize"] + ["minimize"] * (m - 1)
    assert promotion_order(values, dirs).tolist() == _brute_order(values, dirs)


def test_promoted_set_is_closed_under_domination() -> None:
    from nas.algorithms.promotion import promote

    rng = np.random.default_rng(1)
    values = rng.normal(size=(40, 2))
    chosen = set(promote(values, ["maximize", "minimize"], 13).tolist())
    assert len(chosen) == 13
    for a in range(40):
        for b in chosen:  # nothing left behind dominates a promoted point
            if a not in chosen:
                assert not (values[a, 0] >= values[b, 0] and values[a, 1] <= values[b, 1]
                            and tuple(values[a]) != tuple(values[b]))


def test_rung_budgets() -> None:
    from nas.study.schedule import ScheduleCfg, rung_budgets

    assert rung_budgets(ScheduleCfg(**SCHED)) == [1, 3, 9]
    assert rung_budgets(ScheduleCfg(**{**SCHED, "min_budget": 2})) == [3, 9]  # top is exact
    images = ScheduleCfg(**{**SCHED, "resource": "images", "min_budget": 500, "max_budget": 5000})
    assert rung_budgets(images) == [556.0, 1667.0, 5000.0]


# -- bad schedule values: one clear error before any trial ---------------------------------------
@pytest.mark.parametrize("change,where", [
    ({"eta": 1}, "schedule.eta"), ({"eta": 0.5}, "schedule.eta"),
    ({"min_budget": 10, "max_budget": 2}, "schedule.min_budget"),
    ({"min_budget": None}, "schedule.min_budget/max_budget"),
    ({"resource": "steps"}, "schedule.resource"),
])
def test_bad_schedule_is_a_config_error(change: dict, where: str) -> None:
    from study_files import live_raw

    from hwnas.common.errors import ConfigError
    from nas.study.config import validate_study

    with pytest.raises(ConfigError) as err:
        validate_study(live_raw(schedule={**SCHED, **change}))
    assert [p.where for p in err.value.problems] == [where]
    assert "Fix:" in str(err.value)


def test_tabular_study_cannot_vary_a_budget(tmp_path: Path,
                                            capsys: pytest.CaptureFixture) -> None:
    from study_files import tabular_raw, write_study

    from nas.cli import main

    study = write_study(tmp_path, tabular_raw(schedule=SCHED))
    assert main(["search", str(study), "--out", str(tmp_path / "runs")]) == 2
    assert "schedule.resource: must be a budget" in capsys.readouterr().err
    assert not (tmp_path / "runs" / "tab" / "study.db").exists()  # nothing ran


# -- storage-level behaviour -------------------------------------------------------------------
def _worker(url: str, index: int, n_trials: int, sleep: float) -> None:
    """One worker of a scheduled study: NB201 table metrics, accuracy worse at low budgets."""
    import pandas as pd

    from nas.algorithms.hybrid import HybridSampler
    from nas.search.schedule import SuccessiveHalving
    from nas.study import store
    from nas.study.schedule import ScheduleCfg

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    table = pd.read_parquet(REPO / "hwnas" / "data" / "nb201_fmnist.parquet").set_index("arch")
    ops = ["none", "skip_connect", "nor_conv_1x1", "nor_conv_3x3", "avg_pool_3x3"]
    sh = SuccessiveHalving(ScheduleCfg(**SCHED), ["maximize", "minimize"])
    storage = store.open_storage(url, heartbeat_s=1)
    study = optuna.create_study(study_name="sh", storage=storage, load_if_exists=True,
                                directions=["maximize", "minimize"],
                                sampler=HybridSampler(seed=index))
    store.fail_dead_trials(study, log=lambda _: None, grace_s=3)  # as the driver does

    def objective(trial: optuna.Trial, budget: float | None = None) -> tuple[float, float]:
        trial.set_user_attr(store.PROCESS, store.process_attr())  # first, as the driver's does
        edge = {(j, i): trial.suggest_categorical(f"node{j}_in{i}", ops)
                for j in range(1, 4) for i in range(j)}
        arch = "+".join("|" + "|".join(f"{edge[j, i]}~{i}" for i in range(j)) + "|"
                        for j in range(1, 4))
        trial.set_user_attr("arch", arch)
        trial.set_user_attr("worker", index)
        row = table.loc[arch]
        time.sleep(sleep)
        return row["acc_digital"] * (1 - 0.3 / budget), row["latency_ms"]

    def stop(study: optuna.Study, _trial: object) -> None:
        if len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))) >= n_trials:
            study.stop()

    sh.promote(study)
    study.optimize(sh.wrap(objective), callbacks=[sh, stop])


def _spawn(url: str, index: int, n_trials: int, sleep: float = 0.02) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get(
        "PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, __file__, "worker", url, str(index), str(n_trials),
                             str(sleep)], cwd=REPO, env=env)


def _load(url: str) -> optuna.Study:
    return optuna.load_study(study_name="sh", storage=url)


def _check_consistent(study: optuna.Study) -> dict[int, int]:
    """No promotion run twice, every promoted trial's parent finished one rung below with the
    same params, and every promotion due now is held (queued, running or done)."""
    from nas.search.schedule import SuccessiveHalving, pending
    from nas.study.schedule import ScheduleCfg

    trials = study.get_trials(deepcopy=False)
    done = [t for t in trials if t.state == TrialState.COMPLETE]
    keys = [t.user_attrs["promotion"] for t in done if "promotion" in t.user_attrs]
    assert len(keys) == len(set(keys)), "a promotion was evaluated twice"
    by_number = {t.number: t for t in trials}
    for t in done:
        if t.user_attrs["rung"] > 0:
            parent = by_number[t.user_attrs["parent"]]
            assert parent.state == TrialState.COMPLETE
            assert parent.user_attrs["rung"] == t.user_attrs["rung"] - 1
            assert parent.params == t.params
    sh = SuccessiveHalving(ScheduleCfg(**SCHED), ["maximize", "minimize"])
    assert pending(sh.records(study), sh.directions, 3, sh.top) == [], "a promotion was lost"
    rungs: dict[int, int] = {}
    for t in done:
        rungs[t.user_attrs["rung"]] = rungs.get(t.user_attrs["rung"], 0) + 1
    return rungs


def test_duplicate_promotion_runs_once(tmp_path: Path) -> None:
    from nas.search.schedule import SuccessiveHalving
    from nas.study.schedule import ScheduleCfg

    url = f"sqlite:///{tmp_path / 'sh.db'}"
    study = optuna.create_study(study_name="sh", storage=url, directions=["maximize"] * 2)
    sh = SuccessiveHalving(ScheduleCfg(**SCHED), study.directions)
    attrs = {"rung": 1, "bracket": 0, "parent": 0, "promotion": "a@1"}
    for _ in range(2):  # two workers queued the same promotion at the same moment
        study.enqueue_trial({"x": 1}, user_attrs=attrs)
    ran = []
    study.optimize(sh.wrap(lambda trial, budget: ran.append((trial.number, budget)) or (
        trial.suggest_int("x", 0, 3), budget)), n_trials=2)
    states = [t.state for t in study.get_trials()]
    assert ran == [(0, 3.0)] and states == [TrialState.COMPLETE, TrialState.PRUNED]
    assert study.trials[1].user_attrs["duplicate_of"] == 0


@pytest.mark.slow
def test_two_workers_share_rungs(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sh.db'}"
    procs = [_spawn(url, i, 45) for i in range(2)]
    assert [p.wait(timeout=600) for p in procs] == [0, 0]
    study = _load(url)
    rungs = _check_consistent(study)
    assert rungs.get(1, 0) >= 5 and rungs.get(2, 0) >= 1, rungs
    assert {t.user_attrs.get("worker") for t in study.trials} >= {0, 1}  # one storage, 2 workers
    assert sum(t.state == TrialState.COMPLETE for t in study.trials) >= 45


@pytest.mark.slow
def test_resume_after_kill_9_loses_no_rung_result(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sh.db'}"
    proc = _spawn(url, 0, 60, sleep=0.15)
    deadline, ready = time.time() + 900, False
    while not ready and time.time() < deadline and proc.poll() is None:
        time.sleep(0.5)
        try:
            done = _load(url).get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        except Exception:  # noqa: BLE001 - not created yet, or the worker holds the lock
            continue
        ready = len(done) >= 20 and any(t.user_attrs.get("rung", 0) > 0 for t in done)
    os.kill(proc.pid, signal.SIGKILL)
    assert ready, "the worker did not reach rung 1 before the kill"
    proc.wait()
    before = {t.number: (t.values, t.user_attrs["rung"], t.params)
              for t in _load(url).get_trials(states=(TrialState.COMPLETE,))}
    time.sleep(3.5)  # a trial killed before its first beat is an orphan after 3 s
    assert _spawn(url, 1, 60).wait(timeout=600) == 0
    study = _load(url)
    after = {t.number: (t.values, t.user_attrs["rung"], t.params) for t in study.trials
             if t.state == TrialState.COMPLETE}
    assert all(after[n] == v for n, v in before.items()), "a stored rung result changed or went"
    assert not [t for t in study.trials if t.state == TrialState.RUNNING]
    _check_consistent(study)


if __name__ == "__main__" and sys.argv[1:2] == ["worker"]:
    _worker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]))


@pytest.mark.slow
def test_live_study_trains_each_rung_at_its_budget(tmp_path: Path) -> None:
    from study_files import live_raw

    from nas.results import summary
    from nas.search.run import run_search
    from nas.study.config import validate_study
    from nas.study.store import load_dir

    raw = live_raw("sh_live", n_trials=5, train={"epochs": 1, "batch_size": 64, "lr": 0.05},
                   schedule={"type": "sh", "eta": 3, "min_budget": 100, "max_budget": 900,
                             "resource": "images"},
                   # AdaBS needs more images than the first rung trains on: scoring is the same
                   # at every rung, drawn from the whole training split
                   hw_eval={"repeats": 2, "eval_limit": 100, "target_se": None, "adabs": 128})
    study_dir = run_search(validate_study(raw), out_root=tmp_path, progress=False)
    cfg, study, _ = load_dir(study_dir)
    done = [t for t in study.trials if t.state == TrialState.COMPLETE]
    assert {t.user_attrs["budget"] for t in done} >= {100.0, 300.0}
    for t in done:  # images seen in training follow the rung's budget
        assert t.user_attrs["budget"] == [100.0, 300.0, 900.0][t.user_attrs["rung"]]
        assert t.user_attrs["pcm_adabs"] == 128
    promoted = [t for t in done if t.user_attrs["rung"] == 1]
    parent = study.trials[promoted[0].user_attrs["parent"]]
    assert parent.user_attrs["arch"] == promoted[0].user_attrs["arch"]
    # the front and export see each arch at the highest rung it reached only
    assert parent.number not in {t.number for t in summary.completed(study)}
    assert promoted[0].number in {t.number for t in summary.completed(study)}


def _sh_cfg(target_se: float | None = 0.01, rung_se: str = "sqrt"):  # noqa: ANN202
    from study_files import live_raw

    from nas.study.config import validate_study

    return validate_study(live_raw(
        "rung_se", train={"epochs": 1, "batch_size": 64, "lr": 0.05},
        schedule={"type": "sh", "eta": 3, "min_budget": 100, "max_budget": 900,
                  "resource": "images", "rung_se": rung_se},
        hw_eval={"repeats": 2, "eval_limit": 100, "target_se": target_se, "adabs": 64}))


def test_rung_precision_relaxes_with_the_square_root_of_the_budget() -> None:
    from nas.study.schedule import RUNG_SE_CAP, RungPrecision, rung_precision

    cfg = _sh_cfg(0.01)  # hw_eval: repeats 2, max_repeats 10
    top = RungPrecision(0.01, 10)
    assert rung_precision(cfg, None) == rung_precision(cfg, 900.0) == top  # the top rung
    # the target grows as sqrt(max/budget); the programmings cap shrinks by the same factor
    assert rung_precision(cfg, 300.0) == RungPrecision(pytest.approx(0.01 * 3**0.5), 6)
    assert rung_precision(cfg, 100.0) == RungPrecision(pytest.approx(0.03), 3)
    assert rung_precision(_sh_cfg(0.02), 100.0) == RungPrecision(RUNG_SE_CAP, 4)  # capped
    assert rung_precision(_sh_cfg(0.08), 100.0) == RungPrecision(0.08, 10)  # never tighter
    assert rung_precision(_sh_cfg(0.01, "fixed"), 100.0) == top
    assert rung_precision(_sh_cfg(None), 100.0) == RungPrecision(None, 10)


def test_each_rung_is_scored_to_its_target(monkeypatch: pytest.MonkeyPatch) -> None:
    from nas.scoring import glue
    from nas.scoring.evaluate import Evaluator

    seen: list = []
    real = glue.hw_accuracy

    def spy(*args, precision=None, **kwargs):  # noqa: ANN002, ANN003, ANN202
        seen.append(precision)
        return real(*args, precision=precision, **kwargs)

    monkeypatch.setattr(glue, "hw_accuracy", spy)
    evaluator = Evaluator(_sh_cfg(0.01))
    low = evaluator.evaluate("rn:s16-d1r1c16", budget=100.0)
    evaluator.evaluate("rn:s16-d1r1c16", budget=900.0)
    assert [(p.target_se, p.max_repeats) for p in seen] == [(pytest.approx(0.03), 3), (0.01, 10)]
    assert 2 <= low.metrics["acc_pcm@1d_repeats"] <= 3  # the rung's cap reached analog.evaluate


def test_hyperband_fills_brackets_in_the_papers_proportions() -> None:
    from nas.study.schedule import bracket_of, hyperband_shares

    assert hyperband_shares(3, 3.0) == [9, 5, 3]  # Li et al.: s_max = 2, eta = 3
    assert hyperband_shares(4, 3.0) == [27, 12, 6, 4]
    assert hyperband_shares(1, 3.0) == [1]
    starts = [bracket_of(n, [9, 5, 3]) for n in range(34)]
    assert [starts.count(b) for b in range(3)] == [18, 10, 6]
    assert starts[:17] == [0] * 9 + [1] * 5 + [2] * 3
    # every bracket spends about the same budget (rung budgets 1, 3, 9 at eta 3): no bracket
    # takes half of the compute, as equal counts gave the one that never halves
    spend = []
    for b, n in enumerate(hyperband_shares(3, 3.0)):
        total = 0
        for rung in range(b, 3):  # the best floor(n / eta) go up a rung, at 3x the budget
            total, n = total + n * 3**rung, n // 3
        spend.append(total)
    assert spend == [27, 24, 27] and max(spend) / sum(spend) < 0.4
