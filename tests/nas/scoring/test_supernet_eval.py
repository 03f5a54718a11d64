"""``evaluator: supernet``: candidates scored on inherited weights, the supernet loaded once per
process and trained as step 0 when missing; bad checkpoints are clear errors."""

from __future__ import annotations

import pytest
import torch

from hwnas.common.errors import ConfigError
from hwnas.train.supernet import SupernetTrainConfig, train_supernet
from nas.scoring import supernet as supernet_eval
from nas.scoring.evaluate import Evaluator
from nas.study.config import validate_study
from nas.study.files import load_study
from nas.study.schedule import fidelities
from search_spaces.supernet import build_supernet

TINY = {"steps": 2, "batch_size": 4, "k": 0, "warmup_steps": 0}
ARCH = "mb:re-s8-k3e1c8d1-k5e3c16d1-k3e1c24d1-k3e1c48d1-k3e1c64d1"


def _study(**supernet) -> dict:
    return {"name": "sn", "space": "mbconv", "evaluator": "supernet", "supernet": supernet,
            "data": {"train_limit": 64, "test_limit": 64},
            "objectives": [{"metric": "accuracy"}, {"metric": "latency"}],
            "hw_eval": {"eval_limit": 64},
            "latency": {"max_seconds": 0.05, "threads": 1}}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    torch.set_num_threads(1)
    path = tmp_path_factory.mktemp("sn") / "mbconv.pt"
    train_supernet(SupernetTrainConfig(space="mbconv", train_limit=64, **TINY), path,
                   build=build_supernet)
    return path


def test_candidates_inherit_and_score_deterministically(checkpoint):
    cfg = validate_study(_study(checkpoint=str(checkpoint), bn_images=32))
    a, b = Evaluator(cfg).evaluate(ARCH), Evaluator(cfg).evaluate(ARCH)
    assert a.metrics["acc_digital"] == b.metrics["acc_digital"]
    assert a.info["evaluator"] == "supernet" and a.info["bn_images"] == 32
    assert "train_seconds" not in a.metrics and a.metrics["inherit_seconds"] > 0
    net, _ = supernet_eval.supernet_for(cfg, Evaluator(cfg).data)
    sub = net.extract(ARCH)
    assert a.state_dict.keys() == sub.state_dict().keys()
    # BN statistics were re-estimated on the calibration images, not taken from the bank
    key = "bn1.running_mean"
    assert not torch.equal(a.state_dict[key], sub.state_dict()[key])


def test_the_supernet_is_loaded_once_per_process(checkpoint):
    cfg = validate_study(_study(checkpoint=str(checkpoint)))
    data = Evaluator(cfg).data
    assert supernet_eval.supernet_for(cfg, data)[0] is supernet_eval.supernet_for(cfg, data)[0]


def test_missing_supernet_is_trained_as_step_zero(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = validate_study(_study(train=TINY))
    out = Evaluator(cfg).evaluate(ARCH)
    assert (tmp_path / "runs" / "sn" / "supernet.pt").is_file()
    assert out.metrics["supernet_train_seconds"] > 0 and out.info["supernet_steps"] == 2


def test_checkpoint_of_another_space_is_an_error(checkpoint):
    raw = _study(checkpoint=str(checkpoint)) | {"space": "resnet"}
    with pytest.raises(ConfigError, match="must be a resnet supernet"):
        Evaluator(validate_study(raw)).evaluate("rn:s16-d1r1c16")


def test_named_checkpoint_that_is_missing_is_an_error(tmp_path):
    cfg = validate_study(_study(checkpoint=str(tmp_path / "none.pt")))
    with pytest.raises(ConfigError, match="hwnas supernet train mbconv"):
        Evaluator(cfg).evaluate(ARCH)


def test_unknown_train_field_is_an_error():
    cfg = validate_study(_study(train={"stepz": 3}))
    with pytest.raises(ConfigError, match="SupernetTrainConfig fields"):
        supernet_eval.train_config(cfg)


def test_quickstart_supernet_study_validates():
    cfg = load_study("quickstart_supernet")
    assert cfg.evaluator == "supernet" and cfg.space == "resnet"


# -- fine-tuning steps: the supernet evaluator's budget for successive halving ---------------------
STEPS = {"type": "sh", "eta": 3, "resource": "steps", "min_budget": 1, "max_budget": 3}


def test_finetune_steps_train_the_inherited_weights_deterministically(checkpoint):
    plain = Evaluator(validate_study(_study(checkpoint=str(checkpoint)))).evaluate(ARCH)
    cfg = validate_study(_study(checkpoint=str(checkpoint), finetune_steps=2))
    a, b = Evaluator(cfg).evaluate(ARCH), Evaluator(cfg).evaluate(ARCH)
    assert a.info["finetune_steps"] == 2 and a.metrics["train_seconds"] > 0
    assert "finetune_steps" not in plain.info
    key = "conv_stem.weight"  # a trained weight, not only BN statistics, moved
    assert not torch.equal(a.state_dict[key], plain.state_dict[key])
    assert torch.equal(a.state_dict[key], b.state_dict[key])
    assert a.metrics["acc_digital"] == b.metrics["acc_digital"]


def test_a_rung_budget_is_the_number_of_finetune_steps(checkpoint):
    cfg = validate_study({**_study(checkpoint=str(checkpoint)), "schedule": STEPS})
    assert fidelities(cfg) == ("steps",)
    ev = Evaluator(cfg)
    low, top = ev.evaluate(ARCH, budget=1), ev.evaluate(ARCH, budget=3)
    assert (low.info["finetune_steps"], top.info["finetune_steps"]) == (1, 3)
    assert not torch.equal(low.state_dict["conv_stem.weight"], top.state_dict["conv_stem.weight"])


@pytest.mark.parametrize("resource", ["epochs", "images"])
def test_a_supernet_study_cannot_vary_proxy_training_budgets(checkpoint, resource):
    raw = {**_study(checkpoint=str(checkpoint)), "schedule": {**STEPS, "resource": resource}}
    with pytest.raises(ConfigError) as err:
        validate_study(raw)
    assert [p.where for p in err.value.problems] == ["schedule.resource"]
    assert "steps" in str(err.value)


@pytest.mark.slow
def test_a_supernet_study_runs_successive_halving_on_finetune_steps(checkpoint, tmp_path):
    from optuna.trial import TrialState

    from nas.search.run import run_search
    from nas.study.store import load_dir

    raw = {**_study(checkpoint=str(checkpoint)), "n_trials": 5, "schedule": STEPS}
    _, study, _ = load_dir(run_search(validate_study(raw), out_root=tmp_path, progress=False))
    done = [t for t in study.trials if t.state == TrialState.COMPLETE]
    for t in done:  # each trial fine-tuned exactly its rung's budget
        assert t.user_attrs["info"]["finetune_steps"] == [1, 3][t.user_attrs["rung"]]
    promoted = [t for t in done if t.user_attrs["rung"] == 1]
    assert promoted and study.trials[promoted[0].user_attrs["parent"]].user_attrs["arch"] \
        == promoted[0].user_attrs["arch"]
