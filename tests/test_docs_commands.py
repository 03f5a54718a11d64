"""Every command in the README and docs/*.md runs as written, and every ``hwnas`` command the docs
or the library's messages name exists with the flags they give.

Each shell command of the docs is listed in ``HOW`` with the way it is checked: run verbatim,
run with ``--check``, run with a smaller budget appended (argparse keeps the last value), run in
the quick try's sequence, or proved elsewhere (the file and text named must exist). A command
added to the docs and not listed here fails ``test_every_documented_command_is_listed``."""

from __future__ import annotations

import io
import re
import shlex
import shutil
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest

from nas.cli import main

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^( *)```(\w*)\n(.*?)^\1```", re.S | re.M)
SHELL = {"bash", "sh", "shell", "console", ""}
LIBRARY = ("nas", "analog", "hw_cost", "hwnas", "search_spaces")


@dataclass(frozen=True)
class How:
    kind: str  # run | check | budget | flow | elsewhere | gpu
    extra: tuple[str, ...] = ()  # appended to the command (budget, flow)
    proof: tuple[str, str] = ("", "")  # elsewhere: (file, text it holds)


QUICK_TRY = ("hwnas run quickstart --set n_trials=4 --set 'schedule={type: none}' --set "
             "pareto.shrink=off --set hw_eval.repeats=2 --set hw_eval.max_repeats=2 --set "
             "hw_eval.target_se=0.05 --set hw_eval.eval_limit=500 --set hw_eval.adabs=128 --set "
             "train.epochs=1 --set data.train_limit=1000 --set train.threads=1 --set "
             "export.onnx=false")
SUPERNET = ("hwnas supernet train resnet --steps 600 --batch-size 32 --k 1 --lr 0.05 "
            "--train-limit 0 --threads 1 --out runs/supernet/resnet.pt")
WHEEL = ".ci/wheel_check"
RAY_TEST = "tests/nas/search/test_ray_token_cluster.py"

# Placeholders the docs use for what the reader has: replaced before a command runs.
PLACEHOLDERS = {"studies/my_study.yaml": "my_study.yaml"}

HOW: dict[str, How] = {
    "hwnas --version": How("run"),
    "hwnas spaces list": How("run"),
    "hwnas spaces show resnet": How("run"),
    "hwnas search quickstart --check": How("run"),
    "hwnas run quickstart": How("check"),  # the main job itself: 5 minutes
    "hwnas run quickstart --set n_trials=60 --set train.epochs=3": How("check"),
    "hwnas run quickstart --out runs/pcm --set 'objectives=[{metric: accuracy, hw: pcm, "
    "time: 1d}, {metric: latency}]'": How("check"),
    "hwnas search studies/my_study.yaml --workers 4": How("check"),
    "hwnas run quickstart_supernet": How("check"),
    QUICK_TRY: How("flow"),
    "hwnas pareto runs/quickstart": How("flow"),
    "hwnas export runs/quickstart": How("flow"),
    "hwnas finalize runs/quickstart --prune 0.3 --distill --out final/": How(
        # ONNX export of a finalized model is proved by tests/nas/cli/test_finalize.py
        "flow", ("--epochs", "1", "--train-limit", "300", "--bn-images", "64", "--no-onnx")),
    SUPERNET: How("budget", ("--steps", "2")),
    "hwnas analog report --model timm:resnet18 --weights runs/resnet18.pt --data fashion_mnist "
    "--hw pcm_static,reram_cmo --out runs/report-resnet18": How(
        "budget", ("--images", "16", "--repeats", "2", "--times", "1d", "--adabs", "0",
                   "--no-sensitivity")),
    "hwnas supernet train resnet --train-limit 0 --batch-size 256 --k 1 --lr 0.1 "
    "--warmup-steps 100 --steps 900 --device cuda --out runs/supernet/resnet-gpu.pt": How(
        "gpu", ("--steps", "2")),
    "python -m bench.gpu.campaign --all": How("gpu"),
    "python -m bench.hwtruth work --device cuda --hours 0.12": How("gpu"),
    "python -m bench.hwtruth hwa-work --device cuda --hours 0.12": How("gpu"),
    "python -m bench.gpu.campaign --part latency": How("gpu"),
    "python3 -m bench.gpu.campaign --part latency --part roofline --data-root "
    "data/fashion-mnist --out $OUT": How("gpu"),
    "python -m bench.gpu.campaign --collect": How(
        "elsewhere", proof=("bench/sections.py", '"python -m bench.gpu.campaign"')),
    "pytest": How("elsewhere", proof=(".ci/run", "uv run pytest")),
    "uv build --wheel": How("elsewhere", proof=(WHEEL, "uv build --wheel")),
    "uv venv --python 3.11 ~/hwnas-env": How(
        "elsewhere", proof=(WHEEL, "uv venv -q --python 3.11")),
    "uv pip install --python ~/hwnas-env --config-file wheel-install.toml dist/hwnas-*.whl": How(
        "elsewhere", proof=(WHEEL, "--config-file wheel-install.toml")),
    "ray get-auth-token --generate > /dev/null": How(
        "elsewhere", proof=(RAY_TEST, "get-auth-token")),
    "RAY_AUTH_MODE=token ray start --head --port 6379 --num-cpus 8": How(
        "elsewhere", proof=(RAY_TEST, '"RAY_AUTH_MODE": "token"')),
    "RAY_AUTH_MODE=token ray start --address HEAD_IP:6379 --num-cpus 8": How(
        "elsewhere", proof=("bench/ray/multinode.py", '"--address"')),
    "hwnas search studies/my_study.yaml --backend ray --address HEAD_IP:6379": How(
        "elsewhere", proof=(RAY_TEST, '"--backend", "ray"')),
    # the device machine's own set-up (docs/gpu.md): its wheels and data are made there
    "bash bench/gpu/kit.sh": How("elsewhere", proof=("bench/gpu/kit.sh", "uv.lock")),
    "python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl": How(
        "elsewhere", proof=("bench/gpu/kit.sh", ".whl")),
    "export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1": How(
        "elsewhere", proof=("docs/gpu.md", "PYTHONPATH=/tmp/site")),
    "mkdir -p data": How("elsewhere", proof=(".gitignore", "data")),
    "cp -r /usr/share/datasets/fashion-mnist data/": How(
        "elsewhere", proof=(".ci/run", "dataset-fashion-mnist")),
    # a server and a hand-run distributed launch: their flags are checked below
    "MLFLOW_ALLOW_FILE_STORE=true mlflow ui --backend-store-uri runs/mlruns": How(
        "elsewhere", proof=("tests/nas/search/test_tracking.py", "mlruns")),
    "hwnas supernet train resnet --nproc 2 --threads 1 ...": How(
        "elsewhere", proof=("tests/nas/scoring/test_supernet_ddp.py", '"--nproc", "2"')),
    "torchrun --standalone --nproc_per_node 4 -m nas.cli supernet train resnet ...": How(
        "elsewhere", proof=("nas/cli.py", "RANK")),
}


# -- reading the docs -------------------------------------------------------------------------
def _logical_lines(body: str) -> list[str]:
    """Lines of a shell block as written: continuations (``\\``, a trailing ``&&``) joined,
    comment lines and trailing comments out."""
    out, cur = [], ""
    for raw in body.splitlines():
        line = re.sub(r"(^|\s+)#.*$", "", raw).strip()
        line = f"{cur} {line}".strip() if cur else line
        cur = ""
        if line.endswith("\\"):
            cur = line[:-1].rstrip()
        elif line.endswith("&&"):
            cur = line
        elif line:
            out.append(line)
    return out


def documented() -> dict[str, str]:
    """``{command: page}`` of every shell command in a fenced block, as written (``uv run``
    dropped: the same command in the project's environment)."""
    found: dict[str, str] = {}
    for page in PAGES:
        for block in FENCE.finditer(page.read_text()):
            if block.group(2) not in SHELL:
                continue
            for line in _logical_lines(block.group(3)):
                for part in line.split(" && "):
                    found.setdefault(part.strip().removeprefix("uv run "), page.name)
    return found


def named_commands() -> list[tuple[str, str]]:
    """``(where, command)`` of every `hwnas ...` in backticks: docs prose and library messages."""
    out = []
    sources = [*PAGES, *(p for pkg in LIBRARY for p in sorted((ROOT / pkg).rglob("*.py")))]
    for path in sources:
        for span in re.findall(r"`(?:uv run )?(hwnas [^`\n]+)`", path.read_text()):
            head, _, rest = span.partition(" ")[2].partition(" ")
            for sub in head.split("/"):  # `hwnas pareto/export/report`
                out.append((path.relative_to(ROOT).as_posix(), f"hwnas {sub} {rest}".strip()))
    return out


# -- checking names against the real parser ---------------------------------------------------
def _help(path: list[str]) -> str | None:
    """``hwnas PATH --help`` through ``main`` (``cost`` parses its own words at run time)."""
    out = io.StringIO()
    with redirect_stdout(out), redirect_stderr(io.StringIO()):
        try:
            main([*path, "--help"])
        except SystemExit as done:
            usage = f"usage: {' '.join(['hwnas', *path])}"
            if done.code == 0 and out.getvalue().startswith(usage):
                return out.getvalue()
    return None


def unknown_names(command: str) -> list[str]:
    """The subcommand words and ``--flags`` of ``command`` that ``hwnas`` does not have."""
    words = [w.strip("[],.;:()") for w in command.split()[1:]]
    path: list[str] = []
    for word in words:
        if word.startswith("-") or _help([*path, word]) is None:
            break
        path.append(word)
    text = _help(path) or ""
    if not path and words and not words[0].startswith("-"):
        return [words[0]]
    flags = [f.split("=")[0] for w in words if w.startswith("--") for f in w.split("/")]
    return [f for f in flags if not re.search(rf"{re.escape(f)}(?![\w-])", text)]


def test_every_documented_command_is_listed() -> None:
    docs = documented()
    assert sorted(set(docs) - set(HOW)) == [], "add these to HOW with how they are checked"
    assert sorted(set(HOW) - set(docs)) == [], "these are no longer in the docs"


def test_proofs_exist() -> None:
    for command, how in HOW.items():
        if how.kind == "elsewhere":
            path, text = how.proof
            target = ROOT / path
            assert target.exists(), (command, path)
            if text:
                assert text in target.read_text(), (command, path, text)


def test_every_named_hwnas_command_and_flag_exists() -> None:
    commands = [("docs", c) for c in documented() if c.startswith("hwnas ")] + named_commands()
    bad = {(where, c): unknown for where, c in commands if (unknown := unknown_names(c))}
    assert bad == {}


# Flags the library's messages give to other programs, by program.
OTHER_FLAGS = {"--extra": "uv", "--format": "nvidia-smi", "--id": "nvidia-smi",
               "--query-gpu": "nvidia-smi", "--generate": "ray", "--head": "ray",
               "--job": "python -m hwnas.train.ddp", "--max-restarts": "torchrun",
               "--standalone": "torchrun", "--porcelain": "git", "--short": "git",
               "--untracked-files": "git"}


def _all_help(path: list[str] | None = None) -> list[str]:
    """The help text of every ``hwnas`` command and subcommand (``cost``'s own ones included)."""
    path = path or []
    text = _help(path)
    if text is None:
        return []
    subs = {m.group(1) for m in re.finditer(r"^    ([a-z][a-z0-9-]+)\s", text, re.M)}
    subs |= {"cache", "roofline", "build-lut", "eval-predictor"} if path == ["cost"] else set()
    return [text, *(h for s in sorted(subs) for h in _all_help([*path, s]))]


def test_every_flag_the_library_names_exists() -> None:
    """A fix text that names ``--flag`` names one a command has (or another program's, listed)."""
    helps = "\n".join(_all_help())
    named = {}
    for pkg in LIBRARY:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            for flag in re.findall(r"[\"'` (](--[a-z][a-z0-9-]+)", path.read_text()):
                named.setdefault(flag, path.relative_to(ROOT).as_posix())
    missing = {f: where for f, where in named.items() if f not in OTHER_FLAGS
               and not re.search(rf"{re.escape(f)}(?![\w-])", helps)}
    assert missing == {}


def test_other_programs_take_the_documented_flags() -> None:
    """`mlflow ui` and the bench modules the docs name: their ``--help`` lists every flag."""
    for command in documented():
        tokens = shlex.split(command)
        if tokens[0] == "MLFLOW_ALLOW_FILE_STORE=true":
            program = [str(Path(sys.executable).parent / "mlflow"), *tokens[2:3]]
        elif tokens[0].startswith("python") and tokens[1:2] == ["-m"] and "bench" in tokens[2]:
            program = [sys.executable, "-m", tokens[2]]
        else:
            continue
        out = subprocess.run([*program, "--help"], cwd=ROOT, capture_output=True, text=True,
                             timeout=120)
        flags = [t for t in tokens if t.startswith("--")]
        assert all(f in out.stdout for f in flags), (command, out.stdout[-1500:])


# -- running them -----------------------------------------------------------------------------
def argv(command: str, extra: tuple[str, ...] = ()) -> list[str]:
    tokens = [PLACEHOLDERS.get(t, t) for t in shlex.split(command)]
    assert tokens[0] == "hwnas", command
    return [*tokens[1:], *extra]


def run(command: str, extra: tuple[str, ...] = ()) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(argv(command, extra))
        except SystemExit as done:  # --version
            code = int(done.code or 0)
    return code, out.getvalue() + err.getvalue()


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    shutil.copy(ROOT / "studies" / "quickstart.yaml", tmp_path / "my_study.yaml")
    return tmp_path


def test_quick_commands_run_verbatim_and_long_ones_check(workdir: Path) -> None:
    for command, how in HOW.items():
        if how.kind in ("run", "check"):
            code, text = run(command, ("--check",) if how.kind == "check" else ())
            assert code == 0 and "Traceback" not in text, (command, text[-2000:])


def test_a_cuda_command_is_one_clear_error_without_cuda(workdir: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("CUDA present: the GPU campaign's own tests cover these")
    for command, how in HOW.items():
        if how.kind != "gpu":
            continue
        if command.startswith("hwnas "):
            code, text = run(command, how.extra)
        else:
            tokens = shlex.split(command.replace("$OUT", str(workdir / "out")))
            done = subprocess.run([sys.executable, *tokens[1:]], cwd=ROOT, capture_output=True,
                                  text=True, timeout=300)
            code, text = done.returncode, done.stdout + done.stderr
        assert code != 0 and "Traceback" not in text, (command, text[-2000:])
        assert re.search(r"cuda|CUDA", text.strip().splitlines()[-1]), (command, text[-500:])


@pytest.mark.slow
def test_the_supernet_and_analog_report_commands_run_on_a_smaller_budget(workdir: Path) -> None:
    import timm
    import torch

    (workdir / "runs").mkdir()  # the reader's own weights, as docs/analog_report.md assumes
    torch.save(timm.create_model("resnet18", num_classes=10, in_chans=1).state_dict(),
               workdir / "runs" / "resnet18.pt")
    for command, how in HOW.items():
        if how.kind == "budget":
            code, text = run(command, how.extra)
            assert code == 0 and "Traceback" not in text, (command, text[-2000:])
    assert (workdir / "runs" / "supernet" / "resnet.pt").is_file()
    assert (workdir / "runs" / "report-resnet18" / "report.html").is_file()


@pytest.mark.slow
def test_the_quick_try_and_what_follows_it_run(workdir: Path) -> None:
    """docs/quickstart.md's quick try verbatim, then pareto, export and finalize on its study."""
    for command, how in HOW.items():
        if how.kind == "flow":
            code, text = run(command, how.extra)
            assert code == 0 and "Traceback" not in text, (command, text[-2000:])
    study = workdir / "runs" / "quickstart"
    assert (study / "report.html").is_file() and (study / "trials.csv").is_file()
    assert any((study / "pareto").iterdir()) and (workdir / "final").is_dir()
