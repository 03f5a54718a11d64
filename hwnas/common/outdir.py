"""An output folder proved writable before the work starts: a search or an evaluation that runs
for an hour must not find at its end that its results have nowhere to go."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hwnas.common.errors import ConfigError


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
    return path


def fallback_dir(name: str) -> Path:
    """A folder that can take a result already computed when its own folder refused it."""
    return Path(tempfile.mkdtemp(prefix=f"hwnas-{name}-"))
