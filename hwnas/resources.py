"""Files the package ships: the study definitions and the data they point at.

The data (the NB201 table) lives in the package, ``hwnas/data/``. The studies sit at the top level
of a checkout (``studies/``); the wheel carries them inside this package (``hwnas/studies/``;
``pyproject.toml`` maps them with hatch's ``force-include``), because a bare top-level
``studies`` folder in site-packages would collide with any other project that ships one. Both
are found through ``importlib.resources`` first, so an installed wheel works from any folder,
and through the checkout second.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path, PurePosixPath

CHECKOUT = Path(__file__).resolve().parents[1]
# checkout path -> path inside the ``hwnas`` package of the wheel (mirrored in pyproject.toml)
FORCE_INCLUDED: dict[str, str] = {"studies": "studies"}
SHIPPED: dict[str, str] = {
    **FORCE_INCLUDED,
    "hwnas/data": "data",  # in the package already
    # where the table sat before it moved into the package; older study files still name it
    "bench/data/nb201_fmnist.parquet": "data/nb201_fmnist.parquet",
}


def _in_package(rel: str) -> Path | None:
    """``rel`` (a path inside the package) as a real file or folder, when the package has it."""
    entry = resources.files("hwnas").joinpath(*PurePosixPath(rel).parts)
    # the wheel installs as plain files, so the resource is a path on disk (no zip extraction)
    path = Path(str(entry))
    return path if path.exists() else None


def shipped(rel: str | Path) -> Path | None:
    """A checkout-relative path (``studies/quickstart.yaml``, ``hwnas/data/x.parquet``) as the
    installed package carries it, else in the checkout; None when neither has it."""
    posix = PurePosixPath(Path(rel).as_posix())
    for source, target in SHIPPED.items():
        inside = _inside(posix, PurePosixPath(source))
        if inside is not None:
            found = _in_package(str(PurePosixPath(target) / inside))
            if found is not None:
                return found
    local = CHECKOUT / posix
    return local if local.exists() else None


def _inside(path: PurePosixPath, root: PurePosixPath) -> PurePosixPath | None:
    if path == root:
        return PurePosixPath(".")
    return path.relative_to(root) if path.is_relative_to(root) else None


def data_dir() -> Path:
    """The folder of the data the package ships (``hwnas/data``: the NB201 table)."""
    return Path(__file__).resolve().parent / "data"


def studies_dir() -> Path:
    """The folder of the shipped study files (``hwnas/studies`` installed, else ``studies/``)."""
    return shipped("studies") or CHECKOUT / "studies"
