"""The scoring protocol: how an accuracy under a hardware model is estimated, as one object.

``ScoringProtocol`` holds every setting of one ``analog.evaluate`` call that is not data: drift
times, programmings and the precision target that may add more, the seed, drift compensation,
the fast path, the hardware-model overrides, AdaBS, the layers kept digital, the batch and the
device. A study builds it once per scored hardware model (``nas.scoring.glue.scoring_protocol``)
and every caller passes it whole.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ScoringProtocol:
    """``times``: drift times (``"1d"``, seconds...). ``repeats``: programmings (fresh noise each;
    analog only); with ``target_se`` the minimum, grown up to ``max_repeats`` until every time's
    standard error is at most ``target_se``, on images sized for it (up to ``max_images``).
    ``adabs``: training images for batch-norm re-estimation after programming and each drift
    (None: ``analog.defaults.ADABS_IMAGES`` when images are passed; 0: off). ``compensation``:
    global drift compensation. ``fast``: the torch emulation of aihwkit where it applies.
    ``options``: hardware-model overrides (``AnalogOptions``, e.g. ``{"adc_bits": 8}``).
    ``digital``: shell patterns of layers kept digital. ``seed``: every noise stream's seed
    (``hwnas.common.seeds``)."""

    times: Iterable[str | float] = (0.0,)
    repeats: int = 1
    seed: int = 0
    compensation: bool = True
    fast: bool = True
    options: dict[str, Any] | None = None
    adabs: int | None = None
    target_se: float | None = None
    max_repeats: int | None = None
    max_images: int | None = None
    digital: Sequence[str] = ()
    batch_size: int = 500
    device: str = "cpu"
    keep_correct: bool = False
    """Keep each repeat's per-image hits (``TimePoint.correct``) for paired differences."""
