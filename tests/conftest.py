"""Suite-wide settings: an isolated cost cache and run folder per session, quiet Ray on the
loopback address, and the ``gpu`` marker: a test that needs CUDA is marked ``@pytest.mark.gpu``
and skipped where ``torch.cuda.is_available()`` is false, so one marker selects or skips every
CUDA test (``pytest -m gpu`` on a GPU machine)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from xdist.scheduler import LoadScopeScheduling

import hwnas  # noqa: F401  (sets Ray's uv switch before a test imports Ray)

# Local Ray instances on the loopback address, whatever the machine's network interface. Ray 2.60
# on Linux resolves ray.init(_node_ip_address="127.0.0.1") and `ray start --node-ip-address
# 127.0.0.1` to the interface's address (192.0.2.2 on the CI VM); with this switch off the node
# address is 127.0.0.1 (measured). Ray reads it when imported, hence here, before collection.
# It also stops a second raylet from joining, which no test starts.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu: needs CUDA; skipped on CPU-only machines")


def _starts_ray(nodeid: str) -> bool:
    # The project's naming: a test that starts a local Ray says so in its file or test name.
    path, _, name = nodeid.partition("::")
    return "ray" in Path(path).name or "ray" in name.lower()


def _scope(nodeid: str) -> str:
    return "ray" if _starts_ray(nodeid) else nodeid.split("::", 1)[0]


class _FileOrRayScheduling(LoadScopeScheduling):
    """``--dist loadfile`` (a module's fixtures are computed once, on one worker), with every
    test that starts Ray in one scope: one after another on one worker, so two Ray heads never
    start at once on two cores. Scopes go out in collection order, which
    ``pytest_collection_modifyitems`` sets longest first."""

    def _split_scope(self, nodeid: str) -> str:
        return _scope(nodeid)


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> LoadScopeScheduling | None:
    # xdist's own loadgroup cannot group here: it tags node ids, which pytest 9.2 no longer reads.
    if config.getvalue("dist") != "loadfile":
        return None
    config.option.loadscopereorder = False  # keep the longest-first order set below
    return _FileOrRayScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Longest scopes first, so no long one is left for the end while the other worker idles:
    # the Ray scope, then files holding slow (end-to-end) tests, then the rest; stable within.
    slow = {_scope(i.nodeid) for i in items if i.get_closest_marker("slow") is not None}
    items.sort(key=lambda i: (_scope(i.nodeid) != "ray", _scope(i.nodeid) not in slow))
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA (marked gpu); torch.cuda.is_available() is False")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)


@pytest.fixture(autouse=True, scope="session")
def _isolated_caches(tmp_path_factory: pytest.TempPathFactory) -> None:
    # Tests must not read figures measured earlier on this machine, nor leave any behind.
    root = tmp_path_factory.mktemp("hwnas")
    os.environ["HWNAS_CACHE"] = str(root / "costs.db")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
