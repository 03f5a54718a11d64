"""Study files: every shipped study validates; bad input reports every problem at once."""

from __future__ import annotations

from pathlib import Path

import pytest
from study_files import REPO, tabular_raw, write_study

from hwnas.common.errors import ConfigError
from nas.study.config import validate_study
from nas.study.files import STUDIES_DIR, load_study
from nas.study.objectives import METRICS

STUDIES = sorted(p.stem for p in STUDIES_DIR.glob("*.yaml"))


def test_required_studies_ship() -> None:
    assert {"quickstart", "fmnist_mbconv_pcm", "fmnist_vit_int8", "fmnist_resnet_pcm",
            "nb201_table"} <= set(STUDIES)


@pytest.mark.parametrize("name", STUDIES)
def test_every_study_validates(name: str) -> None:
    import torch

    # A GPU study is checked here on the CPU (its CUDA refusal is tested in tests/bench).
    on_cpu = {"latency.device": "cpu", "train.device": "cpu"}
    cfg = load_study(name, on_cpu if name.endswith("_gpu") and not torch.cuda.is_available()
                     else None)
    assert cfg.name == name
    objs = cfg.objectives_resolved()
    assert len({o.key for o in objs}) == len(objs) >= 2
    assert all(o.direction in ("minimize", "maximize") for o in objs)


def test_load_by_path_and_overrides(tmp_path: Path) -> None:
    path = write_study(tmp_path, tabular_raw("by_path"))
    cfg = load_study(path, {"n_trials": 7, "ray.max_concurrent": 3, "sampler.name": "nsga2"})
    assert (cfg.n_trials, cfg.ray.max_concurrent, cfg.sampler.name) == (7, 3, "nsga2")


def test_defaults_and_keys() -> None:
    cfg = validate_study(tabular_raw(objectives=[
        {"metric": "accuracy", "hw": "pcm", "time": "24h"}, {"metric": "latency"},
        {"metric": "accuracy"}], tabular=None, data={"name": "digits"}))
    assert [o.key for o in cfg.objectives_resolved()] == ["acc_pcm@1d", "latency_ms",
                                                          "acc_digital"]
    assert cfg.sampler.name == "default" and cfg.backend == "optuna"
    assert cfg.storage_url(Path("/x/runs/tab")).endswith("/x/runs/tab/study.db")


@pytest.mark.parametrize("name", METRICS.list())
def test_every_metric_is_an_objective(name: str) -> None:
    raw = tabular_raw(tabular=None, data={"name": "digits"},
                      objectives=[{"metric": name}, {"metric": "params" if name != "params"
                                                     else "macs"}])
    obj = validate_study(raw).objectives_resolved()[0]
    assert obj.direction == METRICS.get(name).direction
    assert obj.key.startswith(METRICS.get(name).column)


def _problems(raw: dict) -> dict[str, str]:
    with pytest.raises(ConfigError) as info:
        validate_study(raw)
    return {p.where: f"{p.rule} | {p.value!r} | {p.fix}" for p in info.value.problems}


def test_every_problem_reported_at_once() -> None:
    raw = tabular_raw(name="bad name", space="resnet50", n_trials=-3, colour="blue",
                      objectives=[{"metric": "accuracy", "hw": "pcm9", "time": "1 fortnight"},
                                  {"metric": "latency", "hw": "pcm"}, {"metric": "latency"},
                                  {"metric": "params", "direction": "maximize"},
                                  {"metric": "speed"}],
                      constraints=[{"metric": "latency"}],
                      sampler={"name": "tpe", "options": {"n_startup": 3}},
                      backend="ray", workers=2, storage="http://nope", tabular=None,
                      data={"name": "mnist"})
    got = _problems(raw)
    expected = {"name", "n_trials", "colour", "space", "data.name", "objectives[0].hw",
                "objectives[0].time", "objectives[1].hw", "objectives[2]",
                "objectives[3].direction", "objectives[4].metric", "constraints[0]",
                "sampler.options", "workers", "storage"}
    assert expected <= set(got), set(expected) - set(got)
    assert "resnet50" in got["space"] and "hwnas spaces list" in got["space"]
    assert "1 fortnight" in got["objectives[0].time"] and "30d" in got["objectives[0].time"]
    assert "objectives must differ" in got["objectives[2]"]
    assert "allowed here" in got["colour"] and "n_trials" in got["colour"]
    assert "n_startup_trials" in got["sampler.options"]


@pytest.mark.parametrize("change, where", [
    ({"sampler": "simulated_annealing"}, "sampler.name"),
    ({"tabular": {"path": "nowhere.parquet"}}, "tabular.path"),
    ({"tabular": {"path": str(REPO / "hwnas/data/nb201_fmnist.parquet"), "key": "cell"}},
     "tabular.key"),
    ({"objectives": [{"metric": "accuracy", "hw": "fq8"}, {"metric": "latency"}]}, "tabular"),
    ({"train": {"epochs": 0}}, "train.epochs"),
    ({"hw_eval": {"repeats": 0}}, "hw_eval.repeats"),
    ({"hw_eval": {"target_se": 0}}, "hw_eval.target_se"),
    ({"hw_eval": {"target_se": -0.01}}, "hw_eval.target_se"),
    ({"hw_eval": {"adabs": -1}}, "hw_eval.adabs"),
    ({"hw_eval": {"hwa": "sometimes"}}, "hw_eval.hwa"),
    ({"hw_eval": {"hwa": -1.0}}, "hw_eval.hwa"),
    ({"objectives": []}, "objectives"),
    ({"latency": {"min_seconds": 5.0, "max_seconds": 2.0}}, "latency.min_seconds"),
    ({"latency": {"min_seconds": -1.0}}, "latency.min_seconds"),
])
def test_one_bad_field(change: dict, where: str) -> None:
    assert where in _problems(tabular_raw(**change))


def test_unknown_study_name_lists_known() -> None:
    with pytest.raises(ConfigError, match="quickstart"):
        load_study("no_such_study")


def test_bad_yaml(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("name: [unclosed\n")
    with pytest.raises(ConfigError, match="valid YAML"):
        load_study(path)


def test_hwa_settings_and_the_earlier_field_name() -> None:
    from nas.study.config import AUTO_HWA_EPOCHS, HwEvalCfg

    assert HwEvalCfg().hwa_epochs == 0.0
    assert HwEvalCfg(hwa="auto").hwa_epochs == AUTO_HWA_EPOCHS
    assert HwEvalCfg(hwa=0.25).hwa_epochs == 0.25
    assert HwEvalCfg.model_validate({"hwa_epochs": 0.5}).hwa == 0.5  # earlier study files


def test_adabs_larger_than_the_training_split_is_refused(tmp_path: Path) -> None:
    from study_files import live_raw

    from nas.scoring.evaluate import Evaluator
    from nas.study.config import validate_study

    raw = live_raw("ada", data={"name": "digits", "train_limit": 100},
                   hw_eval={"adabs": 500, "target_se": None})
    with pytest.raises(ConfigError, match=r"hw_eval.adabs.*training split \(100 images\)"):
        Evaluator(validate_study(raw)).prepare()


def _docs_hooks():  # noqa: ANN202 - docs/hooks.py, the manual's generator, as a module
    import importlib.util

    spec = importlib.util.spec_from_file_location("docs_hooks", REPO / "docs" / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_study_reference_reads_every_description_from_the_models() -> None:
    from nas.study.config import LatencyCfg, StudyConfig

    hooks = _docs_hooks()
    reference = hooks.study_reference()
    for model in hooks._models(StudyConfig):
        for name, field in model.model_fields.items():
            assert field.description, f"{model.__name__}.{name} has no description"
            assert field.description.replace("|", "&#124;").replace("<", "&lt;") in reference
    assert not hasattr(hooks, "_WHY")  # one place for a field's meaning: its model
    undescribed = type("Bare", (LatencyCfg,), {"__annotations__": {"x": int}, "x": 0})
    with pytest.raises(ValueError, match="Bare.x has no description"):
        hooks._section(undescribed, "latency")


def test_set_null_gives_none_where_the_field_takes_it(tmp_path: Path) -> None:
    # `--set key=null` is YAML's None: it must reach the config, not be dropped as "not given".
    path = write_study(tmp_path, tabular_raw("nulls", timeout=60.0, train={"lr": 0.05},
                                             hw_eval={"eval_limit": 500}))
    cfg = load_study(path, {"train.lr": None, "timeout": None, "hw_eval.eval_limit": None,
                            "sampler.options.max_mutations": None})
    assert (cfg.train.lr, cfg.timeout, cfg.hw_eval.eval_limit) == (None, None, None)
    assert cfg.sampler.options == {"max_mutations": None}  # a free mapping takes any value


def test_set_null_where_the_field_has_no_none_names_field_value_and_fix(tmp_path: Path) -> None:
    path = write_study(tmp_path, tabular_raw("nulls"))
    with pytest.raises(ConfigError) as info:
        load_study(path, {"train.epochs": None, "constraints": None, "train": None,
                          "n_trials": 3})
    got = {p.where: p for p in info.value.problems}
    assert set(got) == {"train.epochs", "constraints", "train"}  # every one at once
    assert all(p.value is None and "must not be null" in p.rule for p in got.values())
    assert "train.epochs=1.0" in got["train.epochs"].fix  # the default, spelled as an override
    assert "constraints=[]" in got["constraints"].fix
    assert "train.<field>" in got["train"].fix
