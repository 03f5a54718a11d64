"""The fidelity truth set: architectures trained long and scored precisely, to rank recipes against.

Each architecture goes through four units of work, each a JSON file under
``bench/data/fidelity/units/`` once done:

- ``train``: ``TRUTH["train"]`` on the whole Fashion-MNIST training split (60,000 images);
- ``score``: digital test accuracy and ``pcm`` at 1 d and 30 d on the whole test split
  (10,000 images), AdaBS on 512 training images, 10 programmings (20 in the units of the
  first set: the programming SE was small next to training noise, which a second seed measures);
- ``hwa``: HWA fine-tuning of the trained model (``TRUTH["hwa"]``), then ``score_hwa`` as above.
  Where the trained weights live on the other kind of device, the HWA unit trains its own base
  first, on its device, and records it (``base_device``).

Units are claimed with lock files, so several workers (processes, or machines sharing the folder)
grow one truth set; a claim whose process is gone is taken over. Trained weights are kept in
``.hwnas_cache/fidelity/`` (not in git): every unit is seeded, so a missing one is retrained
from its seed. That gives the same weights only under the same software and thread count: on
2026-11-29 four CPU archs retrained 1-3 days after their records scored -0.0024 to +0.0055 digital
accuracy from them (training-seed SD 0.0034), another draw near the record rather than the
record's weights. ``truth.csv`` is rebuilt from the units.
"""

from __future__ import annotations

import json
import math
import os
import random
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from bench import ROOT
from hwnas.common.devices import (
    deterministic_state,
    is_cuda,
    set_deterministic,
    set_tf32,
    tf32_state,
)

DATA = ROOT / "bench" / "data" / "fidelity"
MODELS = ROOT / ".hwnas_cache" / "fidelity"
PHASES = ("train", "score", "hwa", "score_hwa")
NEEDS = {"train": None, "score": "train", "hwa": "train", "score_hwa": "hwa"}

TRUTH: dict[str, Any] = {
    "data": {"name": "fashion_mnist", "val_fraction": 0.0, "seed": 0},
    "train": {"epochs": 5, "batch_size": 256, "lr": 0.2, "label_smoothing": 0.1,
              "warmup_epochs": 0.5, "seed": 0},
    "hwa": {"epochs": 1, "batch_size": 256, "lr": 0.02, "label_smoothing": 0.1,
            "weight_noise": 0.1},
    "score": {"hw": "pcm", "times": ["1d", "30d"], "repeats": 10, "adabs": 512, "seed": 0,
              "fast": True, "images": "test split (10,000)",
              # Also scored on the HERMES-like model the studies score and the energy model charges
              # (units scored before 2026-11-26 hold ``pcm`` only; their rows leave it empty).
              "also": {"hw": "pcm_static", "times": ["1d"]}},
    "threads": 1,
}
# Where the units run (``bench.fidelity truth --device``): not part of the recipe, recorded in each
# unit's provenance. On CUDA, training runs in fp32 (no autocast) like on the CPU.
DEVICE = "cpu"


def use_device(device: str) -> None:
    """Run this process's units on ``device``: on CUDA in fp32 with TF32 off (cuDNN would default
    to TF32) and with deterministic kernels, so that weights lost with a machine are retrained to
    the same values on the same GPU and software (``_redo``), and a later window's HWA and
    scoring start from the weights the record describes."""
    global DEVICE
    DEVICE = device
    if is_cuda(device):
        set_tf32(False)
        set_deterministic()


# An arch string's tag names its space (docs/spaces.md): the truth's spaces.
TAGS = {"rn": "resnet", "mb": "mbconv"}


def space_of(arch: str) -> str:
    """The truth space an arch string belongs to, from its tag (``rn:...`` is resnet)."""
    tag = arch.partition(":")[0]
    if tag not in TAGS:
        raise ValueError(f"truth: arch {arch!r} has tag {tag!r}, not one of the truth's spaces "
                         f"{TAGS}; give a resnet (rn:) or mbconv (mb:) arch string")
    return TAGS[tag]


@dataclass(frozen=True)
class Unit:
    space: str
    arch: str
    phase: str
    seed: int = 0  # the truth's training, initialisation and programming seed

    @property
    def stem(self) -> str:
        tail = f"__s{self.seed}" if self.seed else ""  # seed 0 keeps the first set's names
        return f"{self.space}__{self.arch.replace(':', '_')}__{self.phase}{tail}"

    def at(self, phase: str) -> Unit:
        return Unit(self.space, self.arch, phase, self.seed)

    @property
    def path(self) -> Path:
        return DATA / "units" / f"{self.stem}.json"

    def done(self) -> bool:
        return self.path.is_file()


def pick_archs(space_name: str, n: int, *, max_macs: float | None, seed: int = 0) -> list[str]:
    """``n`` archs spread evenly over log-MACs (up to ``max_macs``), ordered so that any prefix
    is spread too (small, large, middle, ...): a partly built truth set is still usable."""
    from search_spaces import get_space

    space = get_space(space_name)
    rng = random.Random(seed)
    pool = {space.random_arch(rng) for _ in range(600)}
    sized = sorted((space.features(a)["macs"], a) for a in pool)
    sized = [(m, a) for m, a in sized if max_macs is None or m <= max_macs]
    lo, hi = math.log(sized[0][0]), math.log(sized[-1][0])
    picked: list[str] = []
    for q in _spread_order(n):
        target = lo + q * (hi - lo)
        best = min((abs(math.log(m) - target), a) for m, a in sized if a not in picked)
        picked.append(best[1])
    return picked


def _spread_order(n: int) -> list[float]:
    """Quantiles 0..1 in an order whose every prefix covers the range (van der Corput)."""
    qs: list[float] = [0.0, 1.0]
    k = 1
    while len(qs) < n:
        den = 2**k
        qs += [i / den for i in range(1, den, 2)]
        k += 1
    return qs[:n]


def by_cost(space_name: str, archs: list[str]) -> list[str]:
    """Cheapest first (MACs): on a CPU the largest archs take hours each, so a run that has to
    stop leaves as many finished archs as it can; later runs fill in the large ones."""
    from search_spaces import get_space

    space = get_space(space_name)
    return sorted(archs, key=lambda a: space.features(a)["macs"])


def plan(spaces: dict[str, list[str]]) -> list[Unit]:
    """Work in priority order: digital train+score for every space first, then HWA."""
    order = {s: by_cost(s, archs) for s, archs in spaces.items()}
    first = [Unit(s, a, p) for s, archs in order.items() for a in archs for p in PHASES[:2]]
    later = [Unit(s, a, p) for s, archs in order.items() for a in archs for p in PHASES[2:]]
    return first + later


# -- claims -------------------------------------------------------------------------------------
def claim(unit: Unit) -> bool:
    lock = DATA / "claims" / f"{unit.stem}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    me = f"{socket.gethostname()} {os.getpid()}"
    try:
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        host, _, pid = lock.read_text().partition(" ")
        if host != socket.gethostname() or _alive(int(pid or 0)):
            return False
        lock.unlink(missing_ok=True)  # its worker is gone: take the unit over
        return claim(unit)
    os.write(fd, me.encode())
    os.close(fd)
    return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, ValueError):
        return False
    except PermissionError:
        return True
    return pid > 0


def release(unit: Unit) -> None:
    (DATA / "claims" / f"{unit.stem}.lock").unlink(missing_ok=True)


def takeable(unit: Unit, device: str | None = None) -> bool:
    """Whether a worker on ``device`` (this worker's: ``DEVICE``) could run ``unit`` now, its
    claim aside: not done, what it needs done, and that unit's weights here or recomputable
    there (an HWA unit trains its own base where they are not, ``_hwa_base``)."""
    need = NEEDS[unit.phase]
    if unit.done() or (need and not unit.at(need).done()):
        return False
    # else its weights live on the machine that trained them: that one takes it
    return need is None or unit.phase == "hwa" or _weights_here(unit.at(need), device)


def next_unit(units: list[Unit]) -> Unit | None:
    return next((unit for unit in units if takeable(unit) and claim(unit)), None)


def _weights_here(done: Unit, device: str | None = None) -> bool:
    """Whether this machine has, or can recompute on ``device`` (``DEVICE``), the weights of a
    finished unit: recomputing is only faithful on the device its record names (``_redo``)."""
    if (MODELS / f"{done.stem}.pt").is_file():
        return True
    return ran_on(json.loads(done.path.read_text())) == (device or DEVICE).split(":")[0]


# -- the work -----------------------------------------------------------------------------------
def truth_data():  # noqa: ANN202 - DataSplits, loaded once per process
    from hwnas.train.data import load_data

    if not hasattr(truth_data, "cached"):
        truth_data.cached = load_data(**TRUTH["data"])
    return truth_data.cached


def model_of(unit: Unit, phase: str) -> torch.nn.Module:
    from hwnas.common.seeds import TrialSeeds
    from search_spaces import get_space

    data = truth_data()
    with torch.random.fork_rng():
        torch.manual_seed(TrialSeeds(unit.seed).init)
        model = get_space(unit.space).build_for(unit.arch, data)
    path = MODELS / f"{unit.at(phase).stem}.pt"
    if not path.is_file() and phase != "init":
        _redo(unit.at(phase))
    if path.is_file():
        model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    return model.eval()


def _redo(unit: Unit) -> None:
    """Weights of a done unit that this machine lacks: recomputed (seeded, so identical on the
    same device: on a GPU, the worker's deterministic kernels, same GPU and software; records
    written before those were set say so by lacking ``deterministic``). Weights trained on
    another device cannot be recomputed here."""
    recorded = ran_on(json.loads(unit.path.read_text())) if unit.done() else DEVICE
    if recorded != DEVICE.split(":")[0]:
        raise RuntimeError(
            f"truth: the weights of {unit.stem} were trained on {recorded!r} and are missing "
            f"from {MODELS}; recomputing them on {DEVICE!r} would give other weights than its "
            "record. Unpack the archive that brought the record (tar -xf truth_units.tar at the "
            "repository root), or delete the record to train it again here.")
    run_unit(unit, record=False)


def run_unit(unit: Unit, *, record: bool = True) -> dict[str, Any]:
    start = time.perf_counter()
    out = {"train": _train, "hwa": _hwa, "score": _score, "score_hwa": _score}[unit.phase](unit)
    out.update(space=unit.space, arch=unit.arch, phase=unit.phase, seed=unit.seed,
               seconds=round(time.perf_counter() - start, 1))
    if record:
        from hwnas.common.provenance import provenance

        out["provenance"] = provenance(DEVICE)
        out["device"] = DEVICE
        if is_cuda(DEVICE):  # fp32 means TF32 off (the worker sets it); say what was in force
            out["tf32"] = tf32_state()
            out["deterministic"] = deterministic_state()
        unit.path.parent.mkdir(parents=True, exist_ok=True)
        unit.path.write_text(json.dumps(out, indent=1, default=str))
    return out


def _save(model: torch.nn.Module, unit: Unit) -> None:
    MODELS.mkdir(parents=True, exist_ok=True)
    torch.save({k: v.cpu() for k, v in model.state_dict().items()}, MODELS / f"{unit.stem}.pt")


def fit_base(unit: Unit) -> tuple[torch.nn.Module, dict[str, Any]]:
    """The truth's training run (``TRUTH["train"]``) of ``unit``'s arch and seed, on this device."""
    from hwnas.train.loop import FitConfig, evaluate, fit

    data, model = truth_data(), model_of(unit, "init")
    cfg = {**TRUTH["train"], "seed": unit.seed}
    result = fit(model, data, FitConfig(**cfg, device=DEVICE, amp=False))
    acc = evaluate(model, data.x_test, data.y_test, device=DEVICE)["acc"]
    return model, {"acc_digital": acc, "train_seconds": round(result.seconds, 1),
                   "params": sum(p.numel() for p in model.parameters())}


def _train(unit: Unit) -> dict[str, Any]:
    model, out = fit_base(unit)
    _save(model, unit)
    return out


def _hwa_base(unit: Unit) -> tuple[torch.nn.Module, dict[str, Any]]:
    """The trained model HWA starts from: the truth's own weights where this machine has them or
    can recompute them. Where they were trained on the other kind of device and are not here,
    the same training runs here and stays in memory (never saved under the truth's name), and
    the HWA record says so: the HWA truth then has a base of its own, so that one GPU window can
    run every arch's HWA chain, where the CPU would need hours per arch to retrain."""
    if _weights_here(unit.at("train")):
        return model_of(unit, "train"), {}
    model, out = fit_base(unit)
    return model.eval(), {"base_device": DEVICE.split(":")[0],
                          "base_acc_digital": out["acc_digital"],
                          "base_train_seconds": out["train_seconds"]}


def _hwa(unit: Unit) -> dict[str, Any]:
    import analog
    from analog.hwa import HwaOptions
    from hwnas.common.seeds import stream_seed
    from hwnas.train.loop import FitConfig, evaluate

    cfg = dict(TRUTH["hwa"])
    noise = cfg.pop("weight_noise")
    data, (model, base) = truth_data(), _hwa_base(unit)
    fit_cfg = FitConfig(**cfg, seed=stream_seed(unit.seed, "hwa"), device=DEVICE, amp=False)
    result = analog.hwa_fit(model, data, "pcm", fit_cfg, options=HwaOptions(weight_noise=noise))
    _save(model, unit)
    return {"acc_digital": evaluate(model, data.x_test, data.y_test, device=DEVICE)["acc"],
            "hwa_seconds": round(result.seconds, 1), **base}


def _score(unit: Unit) -> dict[str, Any]:
    import analog
    from analog.adabs import training_images
    from hwnas.train.loop import evaluate

    s = TRUTH["score"]
    data = truth_data()
    model = model_of(unit, "train" if unit.phase == "score" else "hwa").to(DEVICE)
    out: dict[str, Any] = {"acc_digital": evaluate(model, data.x_test, data.y_test,
                                                   device=DEVICE)["acc"]}
    res = analog.evaluate(model, data.x_test, data.y_test, s["hw"],
                          _protocol(tuple(s["times"]), unit.seed),
                          adabs_images=training_images(data.x_train, s["adabs"], unit.seed),
                          calib=data.x_train[:256])
    out.update(_points("pcm", s["times"], res))
    out.update(repeats=res.repeats, images=res.images, path=res.path,
               analog_mac_fraction=res.coverage.get("mac_fraction"))
    out.update(_also(model, unit))
    return out


def _also(model: torch.nn.Module, unit: Unit) -> dict[str, Any]:
    """The second hardware column (``TRUTH["score"]["also"]``), seeded on its own: the same
    numbers whether it runs in the score unit or later (``add_also``)."""
    import analog
    from analog.adabs import training_images

    s, data = TRUTH["score"], truth_data()
    also = s["also"]
    res = analog.evaluate(model, data.x_test, data.y_test, also["hw"],
                          _protocol(tuple(also["times"]), unit.seed),
                          adabs_images=training_images(data.x_train, s["adabs"], unit.seed),
                          calib=data.x_train[:256])
    return _points(also["hw"], also["times"], res)


def _protocol(times: tuple[str, ...], seed: int) -> Any:  # noqa: ANN401 - ScoringProtocol
    """The truth's scoring protocol (``TRUTH["score"]``) at ``times``."""
    import analog

    s = TRUTH["score"]
    return analog.ScoringProtocol(times=times, repeats=s["repeats"], seed=seed, fast=s["fast"],
                                  adabs=s["adabs"], device=DEVICE)


def add_also(archs: list[str] | None = None) -> list[str]:
    """Score the ``also`` column on the finished score units that predate it (digital weights,
    ``score``; HWA weights, ``score_hwa``), where this machine holds the unit's weights: such a
    unit's row then compares with the later ones. The record keeps its own provenance and gains
    the column's, under ``also_provenance``. Returns the completed units' stems."""
    from hwnas.common.provenance import provenance
    from hwnas.train.loop import evaluate

    key = f"acc_{TRUTH['score']['also']['hw']}@{TRUTH['score']['also']['times'][0]}"
    done = []
    for path in sorted((DATA / "units").glob("*__score*.json")):
        rec = json.loads(path.read_text())
        unit = Unit(rec["space"], rec["arch"], rec["phase"], int(rec.get("seed", 0)))
        source = unit.at("train" if unit.phase == "score" else "hwa")
        if key in rec or (archs and unit.arch not in archs) \
                or not (MODELS / f"{source.stem}.pt").is_file():
            continue  # computed already, not asked for, or its weights are elsewhere
        start = time.perf_counter()
        model = model_of(unit, source.phase).to(DEVICE)
        data = truth_data()
        acc = evaluate(model, data.x_test, data.y_test, device=DEVICE)["acc"]
        if acc != rec["acc_digital"]:  # other weights than the scored ones: not comparable
            print(f"{unit.stem}: skipped, its weights here give {acc} digitally where the "
                  f"record has {rec['acc_digital']}", flush=True)
            continue
        rec.update(_also(model, unit), also_seconds=round(time.perf_counter() - start, 1),
                   also_provenance=provenance(DEVICE))
        path.write_text(json.dumps(rec, indent=1, default=str))
        done.append(unit.stem)
        print(f"{unit.stem}: {key} {rec[key]:.4f} ({rec['also_seconds']:.0f} s)", flush=True)
    return done


def _points(hw: str, times: list[str], res: Any) -> dict[str, Any]:
    """One score's columns per drift time: mean, spread, SE, median and every programming."""
    out: dict[str, Any] = {}
    for label, point in zip(times, res.points, strict=True):
        key = f"acc_{hw}@{label}"
        out.update({key: point.acc_mean, f"{key}_std": point.acc_std, f"{key}_se": point.acc_se,
                    f"{key}_median": point.acc_median, f"{key}_accs": point.accs})
    return out


def work(units: list[Unit], *, threads: int, stop_after: float | None = None) -> int:
    """Run units until none is left (or ``stop_after`` seconds passed); returns units done."""
    torch.set_num_threads(threads)
    start, done = time.perf_counter(), 0
    while stop_after is None or time.perf_counter() - start < stop_after:
        unit = next_unit(units)
        if unit is None:
            break
        try:
            out = run_unit(unit)
            print(f"{unit.stem}: {out['seconds']:.0f} s", flush=True)
            done += 1
        finally:
            release(unit)
    return done


def with_phases(units: list[Unit], phases: tuple[str, ...] | None) -> list[Unit]:
    """The units of the named phases, in plan order (None: every phase). ``train`` alone lets a
    device machine without aihwkit train the archs that a CPU then scores."""
    return units if phases is None else [u for u in units if u.phase in phases]


def pack(archive: Path, since: float) -> list[str]:
    """Write the unit records and weights written since ``since`` (a run's start, epoch seconds)
    into one tar archive, paths relative to the repository root (``tar -xf`` there restores
    them): a device machine returns a few files per call, so a run's work travels as one.
    Returns the packed paths."""
    import tarfile

    files = [f for folder, pattern in ((DATA / "units", "*.json"), (MODELS, "*.pt"))
             for f in sorted(folder.glob(pattern)) if f.stat().st_mtime >= since]
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "w") as tar:
        for f in files:
            tar.add(f, arcname=str(f.relative_to(ROOT)))
    return [str(f.relative_to(ROOT)) for f in files]


def truth_rows() -> list[dict[str, Any]]:
    """One row per (space, arch, seed, recipe in digital | hwa), from the finished units."""
    units = {}
    for path in sorted((DATA / "units").glob("*.json")):
        rec = json.loads(path.read_text())
        units[(rec["space"], rec["arch"], rec.get("seed", 0), rec["phase"])] = rec
    rows = []
    for (space, arch, seed, phase), rec in units.items():
        if phase not in ("score", "score_hwa"):
            continue
        train = units.get((space, arch, seed, "train"), {})
        row = {"space": space, "arch": arch, "seed": seed,
               "recipe": "digital" if phase == "score" else "hwa",
               "params": train.get("params"), "train_seconds": train.get("train_seconds"),
               "acc_digital": rec["acc_digital"], "repeats": rec["repeats"],
               "images": rec["images"]}
        also = TRUTH["score"]["also"]
        keys = [f"acc_pcm@{t}" for t in TRUTH["score"]["times"]]
        keys += [f"acc_{also['hw']}@{t}" for t in also["times"]]
        for key in keys:
            for suffix in ("", "_se", "_std", "_median"):
                row[f"{key}{suffix}"] = rec.get(f"{key}{suffix}")
        row["train_device"] = device_of(train)
        # an HWA row whose base was trained again on the HWA unit's device (``_hwa_base``)
        hwa = units.get((space, arch, seed, "hwa"), {}) if phase == "score_hwa" else {}
        row["base_device"] = hwa.get("base_device")
        rows.append(row)
    return rows


def device_of(unit: dict[str, Any]) -> str | None:
    """The device a unit ran on, as its provenance names it (a CPU model or a GPU name)."""
    return (unit.get("provenance") or {}).get("device")


def ran_on(unit: dict[str, Any]) -> str:
    """``cpu`` or ``cuda``: the record's own field, else (records before it had one) read from
    the device its provenance names."""
    if "device" in unit:
        return str(unit["device"]).split(":")[0]
    return "cuda" if "NVIDIA" in (device_of(unit) or "") else "cpu"


def write_truth() -> Path:
    """``truth.csv``: the truth (seed 0, every arch); ``truth_seeds.csv``: every seed's rows,
    for the truth's own noise (a second training seed on some archs)."""
    import pandas as pd

    DATA.mkdir(parents=True, exist_ok=True)
    (DATA / "recipe.json").write_text(json.dumps(TRUTH, indent=1))
    table = pd.DataFrame(truth_rows())
    path = DATA / "truth.csv"
    if len(table):
        table[table.seed == 0].to_csv(path, index=False)
        table.to_csv(DATA / "truth_seeds.csv", index=False)
    return path
