"""Suite-wide settings: an isolated cost cache and run folder per session, quiet Ray on the
loopback address, and the ``gpu`` marker: a test that needs CUDA is marked ``@pytest.mark.gpu``
and skipped where ``torch.cuda.is_available()`` is false, so one marker selects or skips every
CUDA test (``pytest -m gpu`` on a GPU machine)."""

from __future__ import annotations

import os

import pytest
import torch
from xdist.scheduler import LoadScopeScheduling

# Local Ray instances on the loopback address, whatever the machine's network interface. Ray 2.60
# on Linux resolves ray.init(_node_ip_address="127.0.0.1") and `ray start --node-ip-address
# 127.0.0.1` to the interface's address (192.0.2.2 on the CI VM); with this switch off the node
# address is 127.0.0.1 (measured). Ray reads it when imported, hence here, before collection.
# It also stops a second raylet from joining, which no test starts.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu: needs CUDA; skipped on CPU-only machines")


# Files that start a local Ray instance. Under pytest-xdist they form one scope, so they run on
# one worker one after another: each starts its own Ray head, and two at once on two cores
# starve each other's raylet start-up.
RAY_FILES = frozenset({
    "tests/hwnas/train/test_ddp_ray.py", "tests/nas/test_finalize.py", "tests/nas/test_plugins.py",
    "tests/nas/test_ray_driver.py", "tests/nas/test_ray_searcher.py",
    "tests/nas/test_schedule_ray.py", "tests/nas/test_reproducible.py",
    "tests/nas/test_study_config.py", "tests/nas/test_ray_accounting.py",
})


class _FileOrRayScheduling(LoadScopeScheduling):
    """``--dist loadfile`` (a module's fixtures are computed once, on one worker), with the Ray
    files as one scope. Scopes go out largest first (xdist's default order)."""

    def _split_scope(self, nodeid: str) -> str:
        path = nodeid.split("::", 1)[0]
        return "ray" if path in RAY_FILES else path


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> LoadScopeScheduling | None:
    # xdist's own loadgroup cannot group here: it tags node ids, which pytest 9.2 no longer reads.
    if config.getvalue("dist") != "loadfile":
        return None
    return _FileOrRayScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
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
