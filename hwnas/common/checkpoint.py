"""The model checkpoint format, ``hwnas-checkpoint/1`` (``model.pt``)::

    {"format", "space", "arch", "state_dict", "data": {name, in_chans, num_classes, img_size},
     "hw", "metrics", "config", "provenance"}   (+ "shapes" when the net is not space.build(arch),
                                                   e.g. after structured pruning)

Everything but the tensors is plain data (str, int, float, list, dict), so a checkpoint loads with
``torch.load(weights_only=True)`` and no code runs at load time; a file that needs full
unpickling (a pickled module, or anything built to run code) is refused with a clear error.

This module writes and reads the file. Rebuilding the model needs its space, so that lives one
floor up (``search_spaces.checkpoint``: ``save_checkpoint``, ``load_checkpoint``, ``load_model``).
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import torch

from hwnas.common.errors import ConfigError
from hwnas.common.provenance import provenance

FORMAT = "hwnas-checkpoint/1"
DATA_KEYS = ("name", "in_chans", "num_classes", "img_size")


def write_checkpoint(path: str | Path, *, space: str, arch: str, state_dict: dict[str, Any],
                     data: dict[str, Any], hw: str = "digital", metrics: dict | None = None,
                     config: dict | None = None, prov: dict | None = None,
                     shapes: dict[str, Any] | None = None) -> Path:
    """Write a ``hwnas-checkpoint/1`` file; ``shapes``: the net's attribute diff against a fresh
    ``space.build(arch)`` (``hwnas.compress.shapes.shape_spec``) when it differs."""
    missing = [k for k in DATA_KEYS if k not in data]
    if missing:
        raise ConfigError.one("checkpoint data", "must give name, in_chans, num_classes, img_size",
                              missing, "pass the DataSplits fields")
    ckpt = {"format": FORMAT, "space": space, "arch": arch,
            "state_dict": {k: v.detach().cpu() for k, v in state_dict.items()},
            "data": {k: data[k] for k in DATA_KEYS}, "hw": hw, "metrics": _plain(metrics or {}),
            "config": _plain(config or {}), "provenance": _plain(prov or provenance("cpu"))}
    if shapes:
        ckpt["shapes"] = shapes
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(ckpt, path)
    return path


def read_checkpoint(path: str | Path) -> dict[str, Any]:
    """The checkpoint's contents: ``torch.load(weights_only=True)``, tensors and plain data only,
    never code; the file must exist and be a ``hwnas-checkpoint/1``."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError.one("checkpoint", "file must exist", str(path),
                              "run `hwnas export runs/<study>` first, or fix the path")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ConfigError.one(
            "checkpoint", "must load with torch.load(weights_only=True): tensors and plain data "
            "only (hwnas never unpickles objects from a file it is given)", f"{path}: {first}",
            "use a model.pt written by this hwnas (hwnas export / finalize / train --save); "
            "re-export older checkpoints that pickled the module") from None
    if not isinstance(ckpt, dict) or ckpt.get("format") != FORMAT:
        found = ckpt.get("format") if isinstance(ckpt, dict) else type(ckpt).__name__
        raise ConfigError.one("checkpoint", f"format must be {FORMAT}", found,
                              "export it with `hwnas export` "
                              "(or search_spaces.checkpoint.save_checkpoint)")
    return ckpt


def _plain(value: Any) -> Any:
    """JSON-level data only (what ``weights_only=True`` loads): other objects become strings."""
    return json.loads(json.dumps(value, default=str))
