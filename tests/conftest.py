"""Suite-wide settings: an isolated cost cache and run folder per session, quiet Ray."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True, scope="session")
def _isolated_caches(tmp_path_factory: pytest.TempPathFactory) -> None:
    # Tests must not read figures measured earlier on this machine, nor leave any behind.
    root = tmp_path_factory.mktemp("hwnas")
    os.environ["HWNAS_CACHE"] = str(root / "costs.db")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
