"""How analog accuracy is scored unless told otherwise: one set of defaults for every entry point.

Studies (``nas.study.config.HwEvalCfg``), ``hwnas analog-eval``, parameter sweeps
(``analog.sweep``) and finalize score analog models the same way, so a number from one can be
held against a number from another:

* AdaBS on, with ``ADABS_IMAGES`` training images (Joshi et al., Nat. Commun. 2020): without it
  the batch norms keep their digital statistics, which costs tens of points after drift and
  multiplies the spread over programmings (DESIGN.md, "Measured since the first wave");
* the validated fast path (``FAST``), falling back to aihwkit's tiles where it cannot emulate;
* global drift compensation (``COMPENSATION``);
* the hardware model ``HW`` when none is named, and ``CALIB_IMAGES`` training images to calibrate
  static input ranges and quantizers.

Every output says which settings it used (``scoring_label`` / ``scoring_record``).
"""

from __future__ import annotations

from typing import Any, Protocol

ADABS_IMAGES = 256
"""Training images that re-estimate the batch norms after programming and each drift."""
FAST = True
"""Score on the fast emulation of aihwkit's tiles (``analog.fast``)."""
COMPENSATION = True
"""Global drift compensation on."""
HW = "pcm_static"
"""The hardware model scored when none is named: the HERMES-like periphery (static input ranges,
one MVM per input vector, 256x256 tiles) that the shipped studies score and the analog energy
estimate charges. ``pcm`` (idealised periphery) is kept for comparison, by name."""
CALIB_IMAGES = 256
"""Training images that calibrate static input ranges (and fake-quant ranges) before scoring."""
REPEATS = 10
"""Programmings per drift time of a stand-alone experiment (``hwnas analog-eval``); studies
size theirs for a target standard error (``analog.precision``)."""


class Scored(Protocol):
    """What a ``DriftResult`` says about how it was scored."""

    adabs: int
    repeats: int
    path: str
    compensation: bool
    images: int


def scoring_record(result: Scored) -> dict[str, Any]:
    """The scoring settings of ``result`` as a flat record (for JSON and CSV)."""
    return {"adabs_images": int(result.adabs), "repeats": int(result.repeats),
            "path": result.path, "compensation": bool(result.compensation),
            "images": int(result.images)}


def scoring_label(result: Scored) -> str:
    """One line for tables and plot titles, e.g. ``AdaBS 256 img, 10 programmings, fast path,
    drift compensation on, 2000 test images``."""
    adabs = f"AdaBS {result.adabs} img" if result.adabs else "AdaBS off"
    path = {"fast": "fast path", "aihwkit": "aihwkit tiles"}.get(result.path, result.path)
    comp = "drift compensation " + ("on" if result.compensation else "off")
    return (f"{adabs}, {result.repeats} programmings, {path}, {comp}, "
            f"{result.images} test images")
