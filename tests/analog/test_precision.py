"""The precision rule: standard errors against brute force, image sizing, repeat growth."""

from __future__ import annotations

import math
import random

import pytest

from analog.precision import (
    PrecisionTarget,
    images_for,
    more_repeats,
    sampling_se,
    standard_error,
)
from hwnas.common.errors import ConfigError


def test_standard_error_adds_programming_and_image_terms():
    accs, images = [0.80, 0.84, 0.78, 0.82], 2000
    mean = sum(accs) / 4
    var = sum((a - mean) ** 2 for a in accs) / 3
    want = math.sqrt(var / 4 + mean * (1 - mean) / images)
    assert standard_error(accs, images) == pytest.approx(want)
    assert sampling_se(0.8, 1600) == pytest.approx(0.01)


def test_images_are_sized_from_the_digital_accuracy():
    target = PrecisionTarget(target_se=0.01)
    n = images_for(0.8, target, available=100_000)
    assert sampling_se(0.8, n) <= 0.01 / math.sqrt(2) + 1e-12 < sampling_se(0.8, n - 1)
    assert images_for(0.8, target, available=500) == 500  # capped by what exists
    assert images_for(0.8, PrecisionTarget(target_se=0.01, max_images=300), 10_000) == 300
    assert images_for(0.8, PrecisionTarget(), available=777) == 777  # no target: all


def _simulate(spread: float, target: PrecisionTarget, images: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    accs = [rng.gauss(0.75, spread) for _ in range(target.min_repeats)]
    while add := more_repeats([accs], images, target):
        accs += [rng.gauss(0.75, spread) for _ in range(add)]
    return accs


@pytest.mark.parametrize("spread", [0.005, 0.02, 0.05])
def test_repeats_grow_until_the_target_or_the_cap(spread):
    target = PrecisionTarget(target_se=0.01, min_repeats=3, max_repeats=40)
    images = images_for(0.75, target, 100_000)
    for seed in range(20):
        accs = _simulate(spread, target, images, seed)
        assert 3 <= len(accs) <= 40
        assert standard_error(accs, images) <= 0.01 or len(accs) == 40
    # a tight spread needs no more than the minimum; a wide one runs into the cap
    assert len(_simulate(0.001, target, images, 0)) == 3
    assert len(_simulate(0.2, target, images, 0)) == 40


def test_without_a_target_repeats_stay_fixed():
    assert more_repeats([[0.1, 0.9, 0.5]], 100, PrecisionTarget(min_repeats=3)) == 0


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"target_se": 0.0}, "target_se"), ({"target_se": -0.01}, "target_se"),
    ({"target_se": 1.5}, "target_se"), ({"min_repeats": 0}, "min_repeats"),
    ({"min_repeats": 5, "max_repeats": 2}, "max_repeats"), ({"max_images": 0}, "max_images")])
def test_bad_targets_are_refused(kwargs, field):
    with pytest.raises(ConfigError, match=field):
        PrecisionTarget(**kwargs)
