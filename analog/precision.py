"""How many programmings and evaluation images an analog accuracy needs for a target precision.

An analog accuracy is the mean over programmings ``r = 1..R`` of the accuracy on ``M`` images.
Its standard error has two parts:

- programming noise: ``s / sqrt(R)``, with ``s`` the sample std over programmings (it also holds
  the read noise of each pass);
- image sampling: ``sqrt(p (1 - p) / M)``, the binomial error of scoring on ``M`` images drawn
  from the data set, which no number of programmings removes.

``SE = sqrt(s**2 / R + p (1 - p) / M)``. With a target, images are sized first, from the digital
accuracy: the fewest images whose sampling error is at most ``target / sqrt(2)`` (capped by the
images available and ``max_images``). Programmings then grow, from ``min_repeats``, until the SE
at every drift time is at most the target or ``max_repeats`` is reached. Sizing images first
keeps every programming on the same images (no re-scoring), and the digital accuracy is known
before any analog pass.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from hwnas.common.errors import ConfigError, Problem


@dataclass(frozen=True, kw_only=True)
class PrecisionTarget:
    """A target standard error for analog accuracies, and the caps that bound its cost."""

    target_se: float | None = None
    """Target SE of each mean accuracy (a fraction: 0.01 is 1 point); None: fixed repeats."""
    min_repeats: int = 3
    """Programmings always run (the first estimate of the spread)."""
    max_repeats: int = 50
    max_images: int | None = None
    """At most this many evaluation images (None: all that were handed over)."""

    def __post_init__(self) -> None:
        problems = []
        if self.target_se is not None and not (
                isinstance(self.target_se, int | float) and 0 < self.target_se < 1):
            problems.append(Problem("target_se", "must be a fraction in (0, 1), or None",
                                    self.target_se, "use e.g. 0.01 for one accuracy point"))
        if not (isinstance(self.min_repeats, int) and self.min_repeats >= 1):
            problems.append(Problem("min_repeats", "must be an integer >= 1", self.min_repeats,
                                    "use e.g. 3"))
        if not (isinstance(self.max_repeats, int) and self.max_repeats >= max(
                1, self.min_repeats if isinstance(self.min_repeats, int) else 1)):
            problems.append(Problem("max_repeats", "must be an integer >= min_repeats",
                                    self.max_repeats, f"use e.g. {max(20, self.min_repeats)}"))
        if self.max_images is not None and not (
                isinstance(self.max_images, int) and self.max_images >= 1):
            problems.append(Problem("max_images", "must be an integer >= 1 or None",
                                    self.max_images, "use e.g. 5000"))
        if problems:
            raise ConfigError(problems)


def sampling_se(p: float, images: int) -> float:
    """Binomial SE of an accuracy ``p`` measured on ``images`` images."""
    return math.sqrt(max(p * (1.0 - p), 0.0) / max(images, 1))


def images_for(p_digital: float, target: PrecisionTarget, available: int) -> int:
    """Evaluation images: all available without a target, else enough for ``target/sqrt(2)``."""
    cap = min(available, target.max_images or available)
    if target.target_se is None:
        return cap
    share = target.target_se**2 / 2.0
    # p(1-p) of at least 0.05: a near-perfect digital model may still lose points on tiles.
    need = math.ceil(max(p_digital * (1.0 - p_digital), 0.05) / share)
    return max(1, min(cap, need))


def standard_error(accs: list[float], images: int) -> float:
    """SE of the mean of ``accs`` (one accuracy per programming, each on ``images`` images)."""
    mean = statistics.fmean(accs)
    spread = statistics.variance(accs) / len(accs) if len(accs) > 1 else 0.0
    return math.sqrt(spread + sampling_se(mean, images) ** 2)


def more_repeats(per_time: list[list[float]], images: int, target: PrecisionTarget) -> int:
    """How many programmings to add (0: the target is met or the cap is reached).

    The estimate ``R = s**2 / (target**2 - sampling**2)`` is capped at doubling the repeats per
    round: a spread estimated from a few programmings of a heavy-tailed distribution is often
    low, and the next round measures it again.
    """
    done = len(per_time[0])
    if target.target_se is None or done >= target.max_repeats:
        return 0
    want = done
    for accs in per_time:
        if standard_error(accs, images) <= target.target_se:
            continue
        room = target.target_se**2 - sampling_se(statistics.fmean(accs), images) ** 2
        s2 = statistics.variance(accs) if len(accs) > 1 else 1.0
        need = math.ceil(s2 / room) if room > 0 else target.max_repeats
        want = max(want, min(need, 2 * done), done + 1)
    return min(want, target.max_repeats) - done


def paired_estimate(a: Sequence[Tensor], b: Sequence[Tensor]) -> tuple[float, float, float]:
    """Mean, SE and std over programmings of ``accuracy(a) - accuracy(b)`` where ``a[r]`` and
    ``b[r]`` are per-image hits (bool) of two evaluations on the same images with repeat ``r``
    on the same seeds; either may hold one mask (a deterministic model: the same every repeat).

    The SE has the two parts of ``standard_error``, paired: the spread over programmings of the
    per-repeat differences, and the image-sampling variance of each image's difference averaged
    over the repeats. Images both models get right or wrong add nothing, where two unpaired SEs
    would each count them."""
    repeats = max(len(a), len(b))
    if not (a and b) or {len(a), len(b)} - {1, repeats}:
        raise ValueError(f"paired masks: {len(a)} against {len(b)} repeats")
    a, b = (list(m) * repeats if len(m) == 1 else list(m) for m in (a, b))
    diffs = torch.stack([x.float() - y.float() for x, y in zip(a, b, strict=True)])
    per_repeat, per_image = diffs.mean(dim=1), diffs.mean(dim=0)
    images = diffs.shape[1]
    spread = float(per_repeat.var()) / repeats if repeats > 1 else 0.0
    sampling = float(per_image.var()) / images if images > 1 else 0.0
    std = float(per_repeat.std()) if repeats > 1 else 0.0
    return float(per_repeat.mean()), math.sqrt(spread + sampling), std
