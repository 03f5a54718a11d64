"""``hwnas finalize`` end to end on a small exported study (digits, resnet space, PCM at 1 day),
plus the checkpoint round trip of pruned models of every space and the bad inputs; the batch
norms re-estimated after pruning, the printed table's labels and what summary.json records."""

from __future__ import annotations

import copy
import json
import random
import re
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
    # Pruned: the batch norms were re-estimated on the AdaBS image count, and the card says so.
    why = m["bn"]["why"]
    assert m["bn"]["layers"] > 0 and why[0] == "pruned (ratio)"
    assert why[-1].startswith("HWA fine-tuned")  # the study's 0.2 HWA epochs
    assert any("re-estimated on 256 training images" in n for n in m["notes"])
    assert "(SE, " in text and "± std" not in text
    # summary.json records what ran: one training process here, no Ray worker count.
    saved = json.loads((study / "final" / "summary.json").read_text())
    assert saved["ran"] == {"backend": "torchrun", "models": 1, "processes": 1}
    assert "workers" not in saved["options"] and saved["options"]["nproc"] == 1
    ran = saved["models"][0]["ran"]
    assert ran["processes"] == 1 and ran["prune_ratio"] == pytest.approx(0.3)
    assert ran["epochs"] == pytest.approx(1.0, abs=0.05) and ran["bn_images"] == 256
    assert ran["adabs_images"] == {"pcm": STUDY["hw_eval"].get("adabs", 256)}
    assert ran["programmings"]["acc_pcm@1d"] >= STUDY["hw_eval"]["repeats"]


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


def _pruned(study: Path):  # noqa: ANN202 - (model, data, cfg)
    from hwnas.compress.prune import PruneConfig, prune
    from hwnas.train.data import load_data
    from nas.finalize import study_config

    model = load_checkpoint(study / "pareto" / arch_dirname(ARCHS[0]) / "model.pt")[0]
    prune(model, (1, 8, 8), PruneConfig(ratio=0.3), measure=lambda m: static_costs(m, (1, 8, 8)))
    return model.eval(), load_data("digits", val_fraction=0.2), study_config(study)


def test_batch_norms_are_reestimated_after_pruning(study: Path) -> None:
    """Pruning changes every layer's inputs: the trained running statistics no longer fit. On
    real digits, the pruned model re-estimated on the AdaBS image count scores no worse (here it
    recovers most of what pruning lost), its BN buffers change, and the same seed gives the same
    buffers."""
    from analog import defaults
    from analog.adabs import batch_norms
    from hwnas.train.loop import evaluate
    from nas.finalize import bn_images, reestimate_bn, val_split

    model, data, cfg = _pruned(study)
    stale = copy.deepcopy(model)
    n = bn_images(cfg, FinalizeConfig())
    assert n == cfg.hw_eval.adabs == defaults.ADABS_IMAGES  # as many images as AdaBS uses
    assert reestimate_bn(model, data, cfg, n) == len(batch_norms(model)) > 0
    old = [(b.running_mean.clone(), b.running_var.clone()) for b in batch_norms(stale)]
    new = [(b.running_mean, b.running_var) for b in batch_norms(model)]
    assert all(not torch.equal(a, b) for (a, _), (b, _) in zip(old, new, strict=True))
    assert all(not torch.equal(a, b) for (_, a), (_, b) in zip(old, new, strict=True))
    x, y = val_split(data, cfg)
    without, with_bn = evaluate(stale, x, y)["acc"], evaluate(model, x, y)["acc"]
    assert with_bn >= without and with_bn > 0.3, (without, with_bn)
    again = copy.deepcopy(stale)
    reestimate_bn(again, data, cfg, n)
    for a, b in zip(batch_norms(again), batch_norms(model), strict=True):
        torch.testing.assert_close(a.running_mean, b.running_mean, rtol=0, atol=0)
    assert not model.training  # scored as it is re-estimated: eval mode


def test_when_batch_norms_are_stale() -> None:
    from nas.finalize import bn_images, stale_bn

    assert stale_bn({"target": "ratio"}, {"epochs": 5.0}, None) == ["pruned (ratio)"]
    assert stale_bn({"target": None}, {"epochs": 0.5}, None) == ["retrained 0.5 epoch (< 1)"]
    assert stale_bn({"target": None}, {"epochs": 2.0}, {"epochs": 0.2})[0].startswith("HWA")
    assert stale_bn({"target": None}, {"epochs": 1.0}, {"epochs": 1.0}) == []
    # one epoch of 8 steps: the running averages still hold 0.9**8 = 43% of the initial ones
    assert stale_bn({"target": None}, {"epochs": 1.0, "steps": 8}, None) == [
        "retrained 8 steps (< 29)"]
    assert stale_bn({"target": None}, {"epochs": 3.0, "steps": 117}, None) == []
    from nas.study.config import validate_study

    off = validate_study({**STUDY, "hw_eval": {**STUDY["hw_eval"], "adabs": 0}})
    from analog import defaults

    assert bn_images(off, FinalizeConfig()) == defaults.ADABS_IMAGES  # AdaBS off: the default
    assert bn_images(off, FinalizeConfig(bn_images=64)) == 64
    with pytest.raises(ConfigError, match="bn_images"):
        FinalizeConfig(bn_images=-1).validate()


# One row of the printed table: label, unit, before, "->", after, ratio.
_ROW = re.compile(r"^  (?P<label>.+?)\s{2,}(?P<unit>count|ms|fraction)\s+(?P<before>.+?) -> "
                  r"(?P<after>.+?)(?:\s+(?P<ratio>x[0-9.]+.*))?$")
_SE = re.compile(r"^[0-9.]+ ± [0-9.e-]+ \(SE, [0-9]+ (programmings|images)\)$")


def _table_rows(text: str) -> list[dict[str, str]]:
    return [m.groupdict() for line in text.splitlines() if (m := _ROW.match(line))]


def test_printed_table_names_every_spread_and_unit(capsys: pytest.CaptureFixture) -> None:
    """Every ± is an SE with what it rests on, as in the Pareto tables; counts are counts."""
    from nas.commands.finalize import print_summary
    from nas.finalize import before_after

    def figures(acc: float, pcm: float, reps: float) -> dict[str, float]:
        out = {"params": 5e4, "macs": 1e6, "latency_ms": 0.5, "latency_p10_ms": 0.45,
               "latency_p90_ms": 0.6}
        for key, a, n in (("acc_digital", acc, 360), ("test_acc_digital", acc, 400)):
            out |= {key: a, f"{key}_se": (a * (1 - a) / n) ** 0.5, f"{key}_images": float(n)}
        return out | {"acc_pcm@1d": pcm, "acc_pcm@1d_std": 0.05, "acc_pcm@1d_se": 0.02,
                      "acc_pcm@1d_median": pcm, "acc_pcm@1d_repeats": reps,
                      "acc_pcm@1d_images": 200.0, "pcm_adabs": 256.0}

    rows = before_after(figures(0.9, 0.8, 3.0), figures(0.85, 0.7, 6.0))
    summary = {"ran": {"backend": "torchrun", "processes": 1, "models": 1},
               "models": [{"arch": ARCHS[0], "folder": "f", "table": rows, "warnings": [],
                           "notes": []}]}
    print_summary(summary, Path("out"))
    parsed = {r["label"]: r for r in _table_rows(capsys.readouterr().out)}
    assert len(parsed) == len(rows) == 9, sorted(parsed)
    for label, r in parsed.items():
        for side in ("before", "after"):
            if "±" in r[side]:
                assert _SE.match(r[side]), (label, r[side])
                assert r["unit"] == "fraction", label
        counted = label.startswith(("parameters", "MACs", "images"))
        assert (r["unit"] == "count") == counted, (label, r["unit"])
        if counted:
            assert re.fullmatch(r"[0-9,]+", r["before"]), r["before"]
    for label in ("accuracy, digital (val)", "accuracy, pcm@1d (val)"):
        assert "±" in parsed[label]["before"]
    assert parsed["accuracy, pcm@1d (val)"]["after"].endswith("(SE, 6 programmings)")
    assert parsed["accuracy, digital (val)"]["before"].endswith("(SE, 360 images)")
    assert parsed["images scored, pcm@1d (val)"]["after"] == "200"
    assert not any(k.endswith(("_repeats", "_std", "_median", "_se")) for k in
                   (r["key"] for r in rows))


def test_options_record_only_the_launch_that_runs() -> None:
    """``workers`` is Ray's: a torchrun record must not show a worker count that never ran."""
    from nas.finalize import asked, what_ran

    assert "workers" not in asked(FinalizeConfig()) and asked(FinalizeConfig())["nproc"] == 1
    ray = asked(FinalizeConfig(backend="ray", workers=3))
    assert ray["workers"] == 3 and "nproc" not in ray
    ran = what_ran(FinalizeConfig(nproc=2), {"target": "ratio", "after": {"ratio": 0.3}},
                   {"world": 2, "epochs": 0.5, "steps": 4}, None,
                   {"images": 256, "layers": 3, "why": ["pruned (ratio)"]},
                   {"acc_pcm@1d": 0.6, "acc_pcm@1d_repeats": 4.0, "pcm_adabs": 256.0})
    assert ran == {"backend": "torchrun", "processes": 2, "prune_target": "ratio",
                   "prune_ratio": 0.3, "epochs": 0.5, "steps": 4, "hwa_epochs": 0.0,
                   "bn_images": 256, "adabs_images": {"pcm": 256},
                   "programmings": {"acc_pcm@1d": 4}}
