"""Independent random streams from one seed: a trial's result is a function of its seed alone.

Every source of randomness in a trial draws from its own stream, derived from the study seed and
the stream's name with numpy's ``SeedSequence`` (hash-mixed, so streams never share draws and
adding a stream leaves the others unchanged):

- ``init``: model initialisation (built under a forked, seeded global RNG);
- ``order``: the training batch order; ``augment``: the training augmentation draws;
- ``dropout``: randomness inside the model while training (the global RNG during ``fit``);
- ``hwa``: the hardware-aware fine-tuning (its own order, augmentation and noise draws);
- ``program``: analog programming noise and drift (per repeat); ``periphery``: the fast path's
  DAC/ADC and output noise (per repeat);
- ``adabs``: which training images re-estimate batch-norm statistics.

A cost-cache miss, the trial order, the worker or the backend can then no longer move a score.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np

STREAMS = ("init", "order", "augment", "dropout", "hwa", "program", "periphery", "adabs")


def _word(value: int | str) -> int:
    """A 64-bit entropy word: integers as they are (mod 2**64), names by a stable hash."""
    if isinstance(value, str):
        return int.from_bytes(hashlib.sha256(value.encode()).digest()[:8], "little")
    return int(value) % 2**64


def rng_devices(device: Any) -> list[int]:
    """The CUDA devices whose generators ``torch.random.fork_rng`` must save and restore around
    seeded work on ``device`` (none on the CPU): a forked stream never leaks into the caller."""
    import torch  # deferred: study files use the streams without loading torch

    dev = torch.device(device)
    if dev.type != "cuda":
        return []
    return [dev.index if dev.index is not None else torch.cuda.current_device()]


def stream_seed(seed: int, stream: str, *index: int | str) -> int:
    """A 63-bit seed for ``(seed, stream, *index)``, independent of every other combination.

    ``index`` tells draws of one stream apart, e.g. the repeat number of a programming.
    Non-negative and below 2**63, so it suits ``torch.manual_seed`` and numpy alike.
    """
    entropy = [_word(seed), _word(stream), *(_word(i) for i in index)]
    state = np.random.SeedSequence(entropy).generate_state(1, dtype=np.uint64)[0]
    return int(state) >> 1


@dataclass(frozen=True)
class TrialSeeds:
    """The seeds one trial uses, stored with the trial so any of its numbers can be redrawn."""

    seed: int

    def __getattr__(self, stream: str) -> int:
        if stream in STREAMS:
            return stream_seed(self.seed, stream)
        raise AttributeError(f"no random stream {stream!r}; streams are {list(STREAMS)}")

    def as_dict(self) -> dict[str, Any]:
        return {"seed": self.seed, **{s: stream_seed(self.seed, s) for s in STREAMS}}
