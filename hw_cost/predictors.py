"""Latency predictors for a space on one device: building the LUT, and scoring the predictors on
held-out measured architectures (share within +-10%, MAPE, Kendall tau)."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import kendalltau

from hw_cost.api import cost_of, device_fingerprint
from hw_cost.backends import fingerprint_hash
from hw_cost.cache import CostCache
from hw_cost.lut import BLOCK_RULE, LatencyLUT
from hw_cost.regressor import LatencyRegressor
from hw_cost.spec import MeasureSpec, StopRule
from hwnas.common.errors import ConfigError
from hwnas.common.settings import settle

# What a predictor predicts: the median latency, or its 10th percentile, which a busy machine
# inflates less (other processes stretch some calls, rarely the fastest tenth).
TARGETS = {"median": "latency_ms", "p10": "latency_p10_ms"}


@dataclass(frozen=True)
class Setting:
    """The measurement setting a predictor is built for (a predictor is only valid for it)."""

    space: str
    input_shape: tuple[int, ...] = (1, 28, 28)
    num_classes: int = 10
    device: str = "cpu"
    batch_size: int = 1
    dtype: str = "fp32"
    threads: int | None = None
    max_seconds: float = 10.0  # cap on timing one whole model
    min_seconds: float = 0.0  # shortest timing of one whole model (see StopRule)
    block_rule: StopRule = BLOCK_RULE  # stop rule for timing one block
    model_rule: StopRule | None = None  # stop rule for a whole model (None: the default)
    clock: str = "wall"  # see options.CLOCKS
    tf32: bool = False  # CUDA's TF32 setting while measuring (a GPU predictor is fitted for one)

    @property
    def lut_key(self) -> str:
        shape = "x".join(map(str, self.input_shape))
        return f"{self.space}:b{self.batch_size}:{shape}:c{self.num_classes}"

    def spec(self) -> MeasureSpec:
        """How a whole model is timed in this setting."""
        return MeasureSpec(device=self.device, batch_size=self.batch_size, dtype=self.dtype,
                           threads=self.threads, max_seconds=self.max_seconds,
                           min_seconds=self.min_seconds, rule=self.model_rule,
                           clock=self.clock, tf32=self.tf32)

    def cost(self, arch: str, cache: CostCache) -> dict:
        return cost_of(self.space, arch, input_shape=self.input_shape,
                       num_classes=self.num_classes, spec=self.spec(), cache=cache)

    def build(self, arch: str):
        from search_spaces import get_space

        return get_space(self.space).build(arch, in_chans=self.input_shape[0],
                                           num_classes=self.num_classes,
                                           img_size=self.input_shape[1])

    def lut(self, cache: CostCache) -> LatencyLUT:
        return LatencyLUT(cache, device_fingerprint(self.device, self.threads), device=self.device,
                          dtype=self.dtype, threads=self.threads, rule=self.block_rule,
                          clock=self.clock)


def sample_archs(space: str, n: int, *, seed: int = 0, exclude: Sequence[str] = ()) -> list[str]:
    """``n`` distinct random archs of ``space`` not in ``exclude`` (seeded)."""
    from search_spaces import get_space

    sp, rng, seen, out = get_space(space), random.Random(seed), set(exclude), []
    for _ in range(100 * n):
        arch = sp.random_arch(rng)
        if arch not in seen:
            seen.add(arch)
            out.append(arch)
            if len(out) == n:
                break
    return out


def measured_rows(setting: Setting, cache: CostCache) -> list[dict]:
    """Cached whole-model measurements of the space in exactly this setting (default options)."""
    fp = fingerprint_hash(device_fingerprint(setting.device, setting.threads))
    rows = cache.rows(space=setting.space, fingerprint=fp, batch=setting.batch_size,
                      dtype=setting.dtype, input_shape=setting.input_shape)
    return [{**r["value"], "arch": r["arch"]} for r in rows
            if r["options"].get("num_classes") == setting.num_classes
            and r["options"].get("clock", "wall") == setting.clock
            and bool(r["options"].get("tf32", False)) == setting.tf32
            and not r["options"].get("channels_last") and not r["options"].get("compile")]


def measure_more(setting: Setting, cache: CostCache, n: int, *, seed: int = 0,
                 go_on: Callable[[int], bool] = lambda _: True) -> int:
    """Measure up to ``n`` random archs of the setting that the cache lacks, while
    ``go_on(measured so far)`` holds (a caller with a time budget stops there); returns how
    many were measured."""
    known = [r["arch"] for r in measured_rows(setting, cache)]
    done = 0
    for arch in sample_archs(setting.space, n, seed=seed + 1, exclude=known):
        if not go_on(done):
            break
        setting.cost(arch, cache)
        done += 1
    return done


def build_lut(setting: Setting, cache: CostCache, *, n: int = 20, seed: int = 0) -> dict:
    """Time every distinct block of ``n`` random archs, measure those archs whole, calibrate.

    One calibration per target statistic (``TARGETS``), all fitted on the same archs.
    """
    lut = setting.lut(cache)
    archs = sample_archs(setting.space, n, seed=seed)
    sums = [lut.block_sum(setting.build(a), setting.input_shape, setting.batch_size)
            for a in archs]
    costs = [setting.cost(a, cache) for a in archs]
    out = {"space": setting.space, "archs": n, "blocks_timed": lut.measured,
           "blocks_in_cache": len(cache.entries("lut_block"))}
    for name, key in TARGETS.items():
        measured = [c[key] for c in costs]
        cal = LatencyLUT.fit(sums, measured, archs)
        lut.save_calibration(setting.lut_key, cal, key)
        out[f"fit_{name}"] = {"a": cal.a, "b": cal.b,
                              **scores([cal.a * s + cal.b for s in sums], measured)}
    return out


def predict_lut(setting: Setting, cache: CostCache, archs: Sequence[str],
                target: str = "latency_ms") -> np.ndarray:
    """Calibrated block-sum predictions (times blocks the LUT has not seen yet)."""
    lut = setting.lut(cache)
    cal = lut.load_calibration(setting.lut_key, target)
    if cal is None:
        raise ConfigError.one("latency LUT", "must be built for this space and setting first",
                              setting.lut_key, f"run: hwnas cost build-lut {setting.space}")
    sums = [lut.block_sum(setting.build(a), setting.input_shape, setting.batch_size)
            for a in archs]
    return cal.a * np.asarray(sums) + cal.b


def scores(predicted: Sequence[float], measured: Sequence[float]) -> dict[str, float]:
    """Share within +-10% of measured, MAPE (%) and Kendall tau of the ranking."""
    p, m = np.asarray(predicted, float), np.asarray(measured, float)
    rel = np.abs(p - m) / m
    tau = kendalltau(p, m).statistic if len(m) > 1 else float("nan")
    # A hair of slack so that exactly 10% (2.2 vs 2.0 in floating point) counts as within.
    return {"n": len(m), "within_10": float(np.mean(rel <= 0.10 + 1e-9)),
            "mape": float(100 * np.mean(rel)), "kendall_tau": float(tau)}


def evaluate(setting: Setting, cache: CostCache, *, measure: int = 0, holdout: float = 0.5,
             regressor: str = "ridge", seed: int = 0, target: str = "median") -> dict:
    """Score the LUT (if built) and the regressor on the same held-out measured archs.

    The held-out archs exclude the LUT's calibration archs; the regressor trains on every other
    measured arch of the setting. ``lut`` uses the calibration of ``build_lut``; ``lut_train``
    the same block sums calibrated on the regressor's training archs. ``measure`` first
    measures that many new random archs. ``target`` is the statistic predicted: ``median`` or
    ``p10`` (see ``TARGETS``).
    """
    if target not in TARGETS:
        raise ConfigError.one("target", f"must be one of {sorted(TARGETS)}", target,
                              "pass --target median")
    key = TARGETS[target]
    LatencyRegressor(regressor)  # an unknown family fails before minutes of measuring
    measure_more(setting, cache, measure, seed=seed)
    rows = measured_rows(setting, cache)
    cal = setting.lut(cache).load_calibration(setting.lut_key, key)
    calib = set(cal.archs) if cal else set()
    pool = [r for r in rows if r["arch"] not in calib]
    random.Random(seed).shuffle(pool)
    test = pool[:math.ceil(holdout * len(pool))]
    test_archs = {r["arch"] for r in test}
    train = [r for r in rows if r["arch"] not in test_archs]
    if not test:
        raise ConfigError.one(
            "eval-predictor", "needs measured archs outside the LUT calibration set", len(rows),
            f"measure some: hwnas cost eval-predictor {setting.space} --measure 50")
    measured = [r[key] for r in test]
    out: dict[str, object] = {"space": setting.space, "target": target, "measured": len(rows),
                              "train": len(train), "test": len(test),
                              "stable_test": sum(bool(r.get("latency_stable")) for r in test),
                              "predictors": {}}
    if cal is not None:
        lut = setting.lut(cache)
        sums = {r["arch"]: lut.block_sum(setting.build(r["arch"]), setting.input_shape,
                                         setting.batch_size) for r in rows}
        test_sums = np.array([sums[r["arch"]] for r in test])
        out["predictors"]["lut"] = scores(cal.a * test_sums + cal.b, measured)
        # The same LUT calibrated on the regressor's training archs: equal data for both.
        refit = LatencyLUT.fit([sums[r["arch"]] for r in train], [r[key] for r in train])
        out["predictors"]["lut_train"] = scores(refit.a * test_sums + refit.b, measured)
    model = LatencyRegressor(regressor, seed=seed, target=key).fit(train)
    out["predictors"][regressor] = scores(model.predict(test), measured)
    return out


_REGRESSOR_MEMO: dict[tuple, LatencyRegressor] = {}


def predict_latency(space: str, arch: str, *, input_shape: Sequence[int], num_classes: int,
                    spec: MeasureSpec | None = None, cache: CostCache | str | None = None,
                    method: str = "auto", **legacy: object) -> float:
    """Predicted latency (ms) of ``arch`` without measuring the whole model, for the timing
    setting ``spec`` (its device, batch, dtype, threads and clock: a predictor is built for one).

    ``method="lut"`` uses the calibrated block LUT (timing any block it has not seen),
    ``"regressor"`` the regressor trained on the cached measurements of this setting; ``"auto"``
    takes the LUT when one was built for the setting, else the regressor. ``legacy``: the
    spec's fields as keywords, the earlier form (deprecated).
    """
    from hw_cost.api import resolve_cache
    from hw_cost.static import static_costs
    from search_spaces import get_space

    spec = settle(MeasureSpec, spec, legacy, "predict_latency")
    batch_size = spec.batch_size
    setting = Setting(space, tuple(input_shape), num_classes, spec.device, batch_size,
                      spec.dtype, spec.threads, clock=spec.clock)
    store = resolve_cache(cache)
    if method not in ("auto", "lut", "regressor"):
        raise ConfigError.one("method", "must be auto, lut or regressor", method,
                              "pass method='auto'")
    has_lut = setting.lut(store).load_calibration(setting.lut_key) is not None
    if method == "lut" or (method == "auto" and has_lut):
        return float(predict_lut(setting, store, [arch])[0])
    rows = measured_rows(setting, store)
    memo_key = (setting, str(store.path), len(rows))
    if memo_key not in _REGRESSOR_MEMO:
        _REGRESSOR_MEMO[memo_key] = LatencyRegressor().fit(rows)
    row = static_costs(setting.build(arch), setting.input_shape, batch_size=batch_size)
    row["features"] = get_space(space).features(arch)
    return float(_REGRESSOR_MEMO[memo_key].predict([row])[0])
