"""``hwnas finalize`` end to end on a small exported study (digits, resnet space, PCM at 1 day),
plus the checkpoint round trip of pruned models of every space and the bad inputs."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch
import yaml

from hw_cost import static_costs
from hwnas.common.errors import ConfigError
from hwnas.common.threads import torch_threads
from nas.cli import main as cli
from nas.commands.finalize import parse_count, parse_latency_ms
from nas.finalize import FinalizeConfig, finalize
from nas.results.export import arch_dirname, export_model
from search_spaces.checkpoint import load_checkpoint, save_checkpoint

ARCHS = ("rn:s16-d1r2c32-d1r1c64", "rn:s16-d1r1c16-d1r1c32")
STUDY = {
    "name": "fin", "space": "resnet", "seed": 0, "n_trials": 2,
    "data": {"name": "digits", "val_fraction": 0.2},
    "objectives": [{"metric": "accuracy", "hw": "pcm", "time": "1d"}, {"metric": "latency"}],
    "train": {"epochs": 1, "batch_size": 64, "lr": 0.05},
    "hw_eval": {"repeats": 2, "eval_limit": 200, "hwa_epochs": 0.2},
    "latency": {"threads": 1, "max_seconds": 0.3},
}


@pytest.fixture(autouse=True)
def _one_thread():
    with torch_threads(1):
        yield


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What `hwnas export` leaves behind: config.yaml, pareto/index.json, pareto/*/model.pt."""
    from hwnas.train.data import load_data
    from hwnas.train.loop import FitConfig, evaluate, fit
    from search_spaces import get_space

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("runs") / "fin"
    (root / "pareto").mkdir(parents=True)
    (root / "config.yaml").write_text(yaml.safe_dump(STUDY))
    data = load_data("digits", val_fraction=0.2)
    meta = {"name": "digits", "in_chans": 1, "num_classes": 10, "img_size": 8}
    rows = []
    for i, arch in enumerate(ARCHS):
        torch.manual_seed(i)
        model = get_space("resnet").build(arch, in_chans=1, num_classes=10, img_size=8)
        fit(model, data, FitConfig(epochs=2 - i, batch_size=64, lr=0.05))
        acc = evaluate(model, data.x_val, data.y_val)["acc"]
        export_model(model, root / "pareto" / arch_dirname(arch), space="resnet", arch=arch,
                     data=meta, hw="pcm", metrics={"acc_digital": acc}, config=STUDY,
                     card={"title": arch, "arch": arch}, onnx=False)
        rows.append({"arch": arch, "folder": arch_dirname(arch)})
    (root / "pareto" / "index.json").write_text(json.dumps({"models": rows}))
    torch.set_num_threads(threads)
    return root


@pytest.mark.slow
def test_finalize_prunes_distills_remeasures_and_exports(study: Path) -> None:
    fc = FinalizeConfig(top=1, prune=0.3, distill=True, epochs=1, onnx=True)
    summary = finalize(study, fc, log=lambda _: None)
    assert json.loads((study / "final" / "summary.json").read_text())["study"] == "fin"
    (m,) = summary["models"]
    assert m["arch"] == ARCHS[0] and m["teacher"].endswith("model.pt")
    before, after = m["before"], m["after"]
    for key in ("latency_ms", "macs", "params", "acc_digital", "acc_pcm@1d", "acc_pcm@1d_std"):
        assert key in before and key in after, key
    assert 0.35 < after["params"] / before["params"] < 0.65  # ~ (1 - 0.3)^2
    assert after["macs"] < 0.7 * before["macs"]
    assert m["train"]["steps"] > 0 and m["prune"]["target"] == "ratio"
    assert m["hwa"]["hw"] == "pcm" and m["hwa"]["distilled"]  # HWA from the teacher, kept
    assert after["acc_digital"] > 0.5  # retrained after pruning: far above chance (0.1)
    folder = study / "final" / m["folder"]
    model, meta = load_checkpoint(folder / "model.pt")
    assert meta["metrics"]["params"] == after["params"]
    assert sum(p.numel() for p in model.parameters()) == after["params"]
    card = json.loads((folder / "card.json").read_text())
    assert card["onnx"]["ok"] and card["finalize"]["table"]
    text = (folder / "card.md").read_text()
    assert "Before / after finalize" in text and "interleaved" in text
    # Latency: both sides timed in one interleaved run, with spreads, units and a ratio.
    timing = m["latency"]
    assert timing["unit"] == "ms" and timing["rounds"] >= 10
    row = next(r for r in m["table"] if r["key"] == "latency_ms")
    assert row["unit"] == "ms" and row["p10_before"] <= row["before"] <= row["p90_before"]
    assert row["ratio_p10"] <= row["ratio"] <= row["ratio_p90"]
    assert all(r["unit"] for r in m["table"])
    assert isinstance(m["warnings"], list)
    # The default teacher is never weaker than its student, measured on the same images.
    assert m["teacher_acc_digital"] >= before["acc_digital"]
    assert "where the study trained" in m["notes"][0] and "distillation" in m["notes"][0]


def test_default_teacher_is_measured_not_read(study: Path, tmp_path: Path) -> None:
    """Stored study metrics can mislead (here they are swapped, as when the study scored
    another subset): the teacher is the most accurate model measured now, never weaker than
    either student."""
    from hwnas.train.data import load_data
    from hwnas.train.loop import evaluate
    from nas.finalize import pareto_models, pick_teacher, study_config, val_split

    cfg = study_config(study)
    data = load_data("digits", val_fraction=0.2)
    x, y = val_split(data, cfg)
    paths = pareto_models(study)
    accs = {str(p): evaluate(load_checkpoint(p)[0], x, y)["acc"] for p in paths}
    lying = []
    for p, fake in zip(paths, (0.0, 1.0), strict=True):  # the stored order, inverted
        model, meta = load_checkpoint(p)
        out = tmp_path / p.parent.name / "model.pt"
        save_checkpoint(out, space=meta["space"], arch=meta["arch"],
                        state_dict=model.state_dict(), data=meta["data"],
                        metrics={"acc_digital": fake})
        lying.append(out)
    _, chosen, acc = pick_teacher(lying, None, data, cfg)
    assert acc == max(accs.values()) and acc >= min(accs.values())
    assert Path(chosen).parent.name == Path(max(accs, key=accs.get)).parent.name


@pytest.mark.parametrize("space", ["mbconv", "nb201", "resnet", "vit"])
def test_pruned_checkpoint_round_trips(space: str, tmp_path: Path) -> None:
    from hwnas.compress.prune import PruneConfig, prune
    from search_spaces import get_space

    sp = get_space(space)
    arch = sp.random_arch(random.Random(3))
    model = sp.build(arch, in_chans=1, num_classes=10, img_size=8)
    prune(model, (1, 8, 8), PruneConfig(ratio=0.3),
          measure=lambda m: static_costs(m, (1, 8, 8)))
    meta = {"name": "digits", "in_chans": 1, "num_classes": 10, "img_size": 8}
    save_checkpoint(tmp_path / "m.pt", space=space, arch=arch, state_dict=model.state_dict(),
                    data=meta, module=model)
    loaded, _ = load_checkpoint(tmp_path / "m.pt")
    x = torch.randn(2, 1, 8, 8)
    torch.testing.assert_close(loaded(x), model.eval()(x))


def test_bad_inputs_are_clear(tmp_path: Path, study: Path) -> None:
    with pytest.raises(ConfigError, match="config.yaml"):
        finalize(tmp_path, FinalizeConfig())
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(STUDY))
    with pytest.raises(ConfigError, match="hwnas export"):
        finalize(tmp_path, FinalizeConfig())
    with pytest.raises(ConfigError) as err:
        FinalizeConfig(prune=0.3, macs_budget=1e6, top=0, backend="mpi", distill=True,
                       alpha=3).validate()
    assert len(err.value.problems) == 4
    with pytest.raises(ConfigError, match="must be in"):
        finalize(study, FinalizeConfig(prune=1.3))
    assert parse_latency_ms("2ms") == 2.0 and parse_latency_ms("500us") == 0.5
    assert parse_count("5M") == 5e6 and parse_count("1.5k") == 1500
    for bad in ("2 fortnights", "-1ms"):
        with pytest.raises(ConfigError, match="positive time"):
            parse_latency_ms(bad)


def test_cli_reports_bad_flags_in_one_line(study: Path, capsys: pytest.CaptureFixture) -> None:
    assert cli(["finalize", str(study), "--workers", "2"]) == 2
    assert "--backend ray" in capsys.readouterr().err
    assert cli(["finalize", str(study), "--latency-budget", "soon"]) == 2
    assert "positive time" in capsys.readouterr().err
