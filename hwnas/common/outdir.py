"""An output folder proved writable before the work starts: a search or an evaluation that runs
for an hour must not find at its end that its results have nowhere to go."""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from pathlib import Path

from hwnas.common.errors import ConfigError, HwnasError

# A study keeps its database, a checkpoint per trained trial (a few MB each for the quickstart's
# candidates) and its report in its folder; under this much free space it would fill the disk.
# HWNAS_MIN_FREE_MB sets another floor (0: no check).
MIN_FREE_MB = 100
OUT_OF_SPACE = (errno.ENOSPC, errno.EDQUOT)


class OutOfSpace(HwnasError):
    """The disk filled up during the work; what was computed is somewhere safe and named."""


def writable_dir(path: str | Path, what: str = "--out") -> Path:
    """``path`` created if missing, and a probe file written and removed in it; else one
    ConfigError naming the folder, the system's reason and the fix."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".hwnas-probe-", dir=path)
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise ConfigError.one(what, "must be a folder this user can create and write",
                              f"{path} ({err.strerror or err})",
                              f"pass {what} DIR on a writable disk, or fix the folder's "
                              "permissions") from None
    free_mb, floor = shutil.disk_usage(path).free / 2**20, min_free_mb()
    if free_mb < floor:
        raise ConfigError.one(what, f"must be on a disk with at least {floor:g} MiB free "
                              "(the database, checkpoints and report go there)",
                              f"{path} ({free_mb:.1f} MiB free)",
                              f"free space on that disk, or pass {what} DIR on another "
                              "(HWNAS_MIN_FREE_MB sets this floor)")
    return path


def min_free_mb() -> float:
    try:
        return float(os.environ.get("HWNAS_MIN_FREE_MB", MIN_FREE_MB))
    except ValueError:
        raise ConfigError.one("HWNAS_MIN_FREE_MB", "must be a number of MiB",
                              os.environ["HWNAS_MIN_FREE_MB"],
                              "e.g. HWNAS_MIN_FREE_MB=50") from None


def out_of_space(err: OSError) -> bool:
    return err.errno in OUT_OF_SPACE


def fallback_dir(name: str) -> Path:
    """A folder that can take a result already computed when its own folder refused it."""
    return Path(tempfile.mkdtemp(prefix=f"hwnas-{name}-"))
