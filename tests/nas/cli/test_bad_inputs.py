"""Bad input, as a newcomer types it: every row runs one ``hwnas`` command in-process and must
exit non-zero with no traceback and a message naming the rule, the value and the fix (the words
listed with the row). A row whose command raises instead of answering fails here."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from nas.cli import main
from nas.commands.search import parse_sets

ARCH = "rn:s16-d1r2c24-d1r1c32"
QUICK = ["run", "quickstart", "--check"]


def _imagefolder(root: Path, junk: bool) -> Path:
    for split in ("train", "test"):
        for cls in ("a", "b"):
            folder = root / split / cls
            folder.mkdir(parents=True)
            Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(folder / "0.png")
    if junk:
        (root / "train" / "a" / "notes.png").write_text("not an image")
    return root


def _study_dir(tmp: Path, db: bytes | None) -> Path:
    """A study folder as hwnas search leaves it, its study.db replaced by ``db``."""
    folder = tmp / "runs" / "quickstart"
    folder.mkdir(parents=True)
    folder.joinpath("config.yaml").write_text((Path("studies") / "quickstart.yaml").read_text())
    if db is not None:
        folder.joinpath("study.db").write_bytes(db)
    return folder


def _a_file(tmp: Path) -> Path:
    path = tmp / "a_file"
    path.write_text("x")
    return path


# (id, argv built from tmp_path, words the message must hold)
CASES = [
    ("shrink-enum", lambda t: [*QUICK, "--set", "pareto.shrink=maybe"], ["pareto.shrink", "maybe",
                                                                      "prior"]),
    ("set-no-equals", lambda t: [*QUICK, "--set", "train.epochs"], ["KEY=VALUE",
                                                                    "--set train.epochs=2"]),
    ("set-unknown-key", lambda t: [*QUICK, "--set", "nosuch.field=1"], ["nosuch"]),
    ("budget-negative", lambda t: [*QUICK, "--set", "constraints=[{metric: latency, max: -1}]"],
     ["constraints[0].max", "never negative", "-1", "positive"]),
    ("budget-zero", lambda t: [*QUICK, "--set", "constraints=[{metric: params, max: 0}]"],
     ["constraints[0].max", "0"]),
    ("budget-min-over-max", lambda t: [*QUICK, "--set",
                                       "constraints=[{metric: latency, min: 9, max: 2}]"],
     ["min must not exceed max", "swap"]),
    ("budget-accuracy-percent", lambda t: [*QUICK, "--set",
                                           "constraints=[{metric: accuracy, min: 80}]"],
     ["fraction", "80", "0.8"]),
    ("budget-params-below-every", lambda t: [*QUICK, "--set",
                                             "constraints=[{metric: params, max: 100}]"],
     ["constraints[0].max", "every one of", "sampled candidates", "100", "raise it to at least"]),
    ("budget-latency-below-every", lambda t: [*QUICK, "--set",
                                              "constraints=[{metric: latency, max: 0.001}]"],
     ["constraints[0].max", "half the latency", "ms measured", "0.001", "raise it to at least"]),
    ("budget-no-bound", lambda t: [*QUICK, "--set", "constraints=[{metric: latency}]"],
     ["needs max or min"]),
    ("n-trials-negative", lambda t: [*QUICK, "--set", "n_trials=-3"], ["n_trials", "-3"]),
    ("space-unknown", lambda t: [*QUICK, "--set", "space=nospace"], ["nospace", "spaces list"]),
    ("data-unknown", lambda t: [*QUICK, "--set", "data.name=nodata"], ["nodata", "data list"]),
    ("sampler-unknown", lambda t: [*QUICK, "--sampler", "nosampler"], ["nosampler"]),
    ("metric-unknown", lambda t: [*QUICK, "--set", "objectives=[{metric: speed}]"],
     ["speed", "registered metric"]),
    ("hw-unknown", lambda t: [*QUICK, "--set", "objectives=[{metric: accuracy, hw: pcmm}, "
                              "{metric: latency}]"], ["pcmm", "analog list"]),
    ("hw-on-latency", lambda t: [*QUICK, "--set", "objectives=[{metric: accuracy}, "
                                 "{metric: latency, hw: pcm}]"], ["accuracy only", "remove hw"]),
    ("epochs-negative", lambda t: [*QUICK, "--set", "train.epochs=-1"], ["train.epochs", "-1"]),
    ("dtype-unknown", lambda t: [*QUICK, "--set", "latency.dtype=fp64"], ["latency.dtype",
                                                                          "fp64"]),
    ("backend-unknown", lambda t: [*QUICK, "--set", "backend=dask"], ["backend", "dask"]),
    ("val-fraction", lambda t: [*QUICK, "--set", "data.val_fraction=1.5"], ["val_fraction",
                                                                            "1.5"]),
    ("timeout-negative", lambda t: [*QUICK, "--set", "timeout=-5"], ["timeout", "-5"]),
    ("workers-zero", lambda t: [*QUICK, "--workers", "0"], ["workers", "0"]),
    ("schedule-unknown", lambda t: [*QUICK, "--set", "schedule={type: nope}"], ["schedule",
                                                                                 "nope"]),
    ("study-unknown", lambda t: ["search", "nosuchstudy", "--check"], ["nosuchstudy"]),
    ("out-under-a-file", lambda t: ["search", "quickstart", "--out", str(_a_file(t) / "x")],
     ["--out", "a_file", "Not a directory", "writable"]),
    ("pg-unreachable", lambda t: ["search", "quickstart", "--out", str(t), "--storage",
                                  "postgresql+psycopg2://bob:secret@127.0.0.1:1/x"],
     ["storage", "bob:***@127.0.0.1:1", "refused", "reachable"]),
    ("pg-bare-url", lambda t: ["search", "quickstart", "--out", str(t), "--storage",
                               "postgresql://bob:secret@127.0.0.1:1/x"],
     ["storage", "psycopg2://bob:***@127.0.0.1:1", "refused"]),
    ("no-driver", lambda t: ["search", "quickstart", "--out", str(t), "--storage",
                             "mysql://bob:secret@127.0.0.1:1/x"],
     ["driver", "bob:***@", "postgresql+psycopg2://"]),
    ("pareto-damaged-db", lambda t: ["pareto", str(_study_dir(t, b"garbage" * 200))],
     ["study.db", "not a database", "trials.parquet", "trials.csv"]),
    ("report-damaged-db", lambda t: ["report", str(_study_dir(t, b"garbage" * 200))],
     ["study.db", "not a database", "trials.parquet"]),
    ("pareto-no-config", lambda t: ["pareto", str(t)], ["config.yaml", "runs/<study>"]),
    ("export-no-config", lambda t: ["export", str(t)], ["config.yaml", "runs/<study>"]),
    ("report-no-config", lambda t: ["report", str(t)], ["config.yaml", "runs/<study>"]),
    ("data-unknown-info", lambda t: ["data", "info", "nodata"], ["nodata", "data list"]),
    ("imagefolder-missing", lambda t: ["data", "info", "imagefolder", "--data-root",
                                       str(t / "none")], ["none", "data.root", "--data-root"]),
    ("imagefolder-no-root", lambda t: ["data", "info", "imagefolder"], ["root", "data.root"]),
    ("imagefolder-junk", lambda t: ["data", "info", "imagefolder", "--data-root",
                                    str(_imagefolder(t / "if", True))],
     ["notes.png", "image", "remove the file"]),
    ("study-imagefolder-junk", lambda t: ["search", "quickstart", "--out", str(t / "runs"),
                                          "--set", "data.name=imagefolder", "--set",
                                          f"data.root={_imagefolder(t / 'if', True)}",
                                          "--set", "pareto.shrink=off", "--set",
                                          "schedule={type: none}", "--no-progress"],
     ["notes.png", "image", "remove the file"]),
    ("imagefolder-channels", lambda t: ["data", "info", "imagefolder", "--data-root",
                                        str(_imagefolder(t / "if", False)),
                                        "--data-option", "channels=2"], ["channels", "2"]),
    ("imagefolder-img-size", lambda t: ["data", "info", "imagefolder", "--data-root",
                                        str(_imagefolder(t / "if", False)),
                                        "--data-option", "img_size=2"], ["img_size", "2"]),
    ("data-option-no-equals", lambda t: ["data", "info", "digits", "--data-option", "img_size"],
     ["--data-option", "KEY=VALUE"]),
    ("fashion-root-missing", lambda t: ["data", "info", "fashion_mnist", "--data-root",
                                        str(t / "none")], ["none", "data.root"]),
    ("analog-eval-out", lambda t: ["analog-eval", "--space", "resnet", "--arch", ARCH, "--data",
                                   "digits", "--out", str(_a_file(t) / "x")],
     ["--out", "a_file", "writable"]),
    ("analog-eval-space", lambda t: ["analog-eval", "--space", "nospace", "--arch", ARCH],
     ["nospace"]),
    ("analog-eval-checkpoint", lambda t: ["analog-eval", "--checkpoint", str(t / "no.pt"),
                                          "--data", "digits"], ["no.pt"]),
    ("analog-eval-hw", lambda t: ["analog-eval", "--space", "resnet", "--arch", ARCH, "--hw",
                                  "pcmm"], ["pcmm", "analog list"]),
    ("cost-space", lambda t: ["cost", "nospace", ARCH], ["nospace"]),
    ("cost-arch", lambda t: ["cost", "resnet", "rn:garbage"], ["rn:garbage"]),
    ("spaces-show", lambda t: ["spaces", "show", "nospace"], ["nospace"]),
    ("train-space", lambda t: ["train", "nospace", ARCH], ["nospace"]),
]


@pytest.mark.parametrize(("argv", "words"), [pytest.param(a, w, id=i) for i, a, w in CASES])
def test_bad_input_is_one_clear_error(argv, words, tmp_path: Path, capsys,  # noqa: ANN001
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(Path(__file__).resolve().parents[3])
    rc = main(argv(tmp_path))
    out = capsys.readouterr()
    text = out.out + out.err
    assert rc != 0 and "Traceback" not in text, text
    assert "secret" not in text
    missing = [w for w in words if w not in text]
    assert not missing, f"{missing} not in: {text}"


def test_there_are_enough_rows() -> None:
    assert len(CASES) >= 45


@pytest.mark.parametrize("word", ["off", "on", "yes", "no", "Off"])
def test_set_keeps_a_yaml_boolean_word_as_typed(word: str) -> None:
    assert parse_sets([f"pareto.shrink={word}"]) == {"pareto.shrink": word}


def test_set_reads_numbers_lists_and_true_as_yaml() -> None:
    got = parse_sets(["train.epochs=2", "export.onnx=false", "x=[1, 2]", "y=true"])
    assert got == {"train.epochs": 2, "export.onnx": False, "x": [1, 2], "y": True}


def test_the_documented_quick_try_checks(capsys, monkeypatch: pytest.MonkeyPatch  # noqa: ANN001
                                         ) -> None:
    monkeypatch.chdir(Path(__file__).resolve().parents[3])
    assert main(["run", "quickstart", "--set", "pareto.shrink=off", "--check"]) == 0
    assert "shrink: 'off'" in capsys.readouterr().out


def test_a_stop_signal_prints_one_line(capsys, monkeypatch: pytest.MonkeyPatch  # noqa: ANN001
                                       ) -> None:
    # the search's stop handler raises Interrupted with its message (tests/nas/test_accounting
    # sends a real SIGTERM to a real search); here the command raises it directly
    import nas.cli
    from nas.search.optuna_driver import Interrupted

    def stopped(_args: object) -> int:
        raise Interrupted("interrupted by SIGTERM: the running trial is stored FAIL; run the "
                          "same command again to continue the study")

    rebound = _Rebound(nas.cli.build_parser(), stopped)
    monkeypatch.setattr(nas.cli, "build_parser", lambda: rebound)
    assert main(["pareto", "x"]) == 130
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1 and "SIGTERM" in err


class _Rebound:
    """The real parser, whose parsed command runs ``func`` instead of its own."""

    def __init__(self, parser, func) -> None:  # noqa: ANN001
        self.parser, self.func = parser, func

    def parse_args(self, argv):  # noqa: ANN001, ANN201
        args = self.parser.parse_args(argv)
        args.func = self.func
        return args


def test_export_has_a_flag_that_turns_onnx_on() -> None:
    from nas.cli import build_parser

    parse = build_parser().parse_args
    assert parse(["export", "x", "--onnx"]).onnx is True
    assert parse(["export", "x", "--no-onnx"]).onnx is False
    assert parse(["export", "x"]).onnx is None  # the study's export.onnx


def test_rerunning_a_finished_study_says_it_runs_nothing(tmp_path: Path,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    import hwnas
    from nas.search.run import reopened_note
    from nas.study.files import load_study

    first = hwnas.run("nb201_table", n_trials=2, out=tmp_path)
    with caplog.at_level("WARNING", logger="hwnas"):
        again = hwnas.run("nb201_table", n_trials=2, out=tmp_path)
    assert len(again.study.trials) == len(first.study.trials)
    assert "n_trials=2 is reached, so this run trains nothing" in caplog.text
    more = load_study("nb201_table", {"n_trials": 5})
    assert "continuing to n_trials=5" in reopened_note(more, tmp_path / "nb201_table")


def test_a_study_sets_the_readers_options(tmp_path: Path) -> None:
    from nas.scoring.evaluate import Evaluator
    from nas.study.files import load_study

    root = _imagefolder(tmp_path / "if", False)
    cfg = load_study("quickstart", {"data": {"name": "imagefolder", "root": str(root),
                                             "options": {"img_size": 12, "channels": 1}}})
    data = Evaluator(cfg).data
    assert (data.in_chans, data.img_size) == (1, 12)
    assert data.x_train.shape[1:] == (1, 12, 12)
