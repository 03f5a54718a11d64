"""The model checkpoint format, ``hwnas-checkpoint/1`` (``model.pt``)::

    {"format", "space", "arch", "state_dict", "data": {name, in_chans, num_classes, img_size},
     "hw", "metrics", "config", "provenance",
     "state_dict_sha256"}   (+ "shapes" when the net is not space.build(arch),
                               e.g. after structured pruning)

Everything but the tensors is plain data (str, int, float, list, dict), so a checkpoint loads with
``torch.load(weights_only=True)`` and no code runs at load time; a file that needs full
unpickling (a pickled module, or anything built to run code) is refused with a clear error.

``state_dict_sha256`` is a sha256 over the weights' names, dtypes, shapes and bytes, in name
order (:func:`state_digest`). torch's zip reader checks no checksum, so a weight damaged on disk
would otherwise load silently and surface later as NaNs or a wrong accuracy. Reading checks, in
order: a complete ``torch.save`` archive, loadable with ``weights_only=True``, the fields of this
format, then the digest. Each failure is a ``ConfigError`` naming the file. A checkpoint written
before the digest existed still loads, with an :class:`UnverifiedCheckpointWarning`.

This module writes and reads the file. Rebuilding the model needs its space, so that lives one
floor up (``search_spaces.checkpoint``: ``save_checkpoint``, ``load_checkpoint``, ``load_model``).
"""

from __future__ import annotations

import hashlib
import json
import pickle
import warnings
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from hwnas.common.errors import ConfigError, Problem
from hwnas.common.provenance import provenance

FORMAT = "hwnas-checkpoint/1"
DATA_KEYS = ("name", "in_chans", "num_classes", "img_size")
DIGEST_KEY = "state_dict_sha256"
_FIELDS = ("space", "arch", "state_dict", "data")
_ZIP_MAGIC = b"PK\x03\x04"  # torch.save writes a zip archive (torch >= 1.6)
# hwnas writes model.pt with these; a file that pickled its module predates the current format.
_REEXPORT = ("use a model.pt written by this hwnas: export it again (hwnas export / finalize / "
             "train --save; re-export older checkpoints that pickled the module), or copy the "
             "original file again")


class UnverifiedCheckpointWarning(UserWarning):
    """A checkpoint without ``state_dict_sha256``: damaged weights in it cannot be detected."""


def write_checkpoint(path: str | Path, *, space: str, arch: str, state_dict: dict[str, Any],
                     data: dict[str, Any], hw: str = "digital", metrics: dict | None = None,
                     config: dict | None = None, prov: dict | None = None,
                     shapes: dict[str, Any] | None = None) -> Path:
    """Write a ``hwnas-checkpoint/1`` file with the weights' sha256; ``shapes``: the net's
    attribute diff against a fresh ``space.build(arch)`` (``hwnas.compress.shapes.shape_spec``)
    when it differs."""
    missing = [k for k in DATA_KEYS if k not in data]
    if missing:
        raise ConfigError.one("checkpoint data", "must give name, in_chans, num_classes, img_size",
                              missing, "pass the DataSplits fields")
    weights = {k: v.detach().cpu() for k, v in state_dict.items()}
    ckpt = {"format": FORMAT, "space": space, "arch": arch, "state_dict": weights,
            "data": {k: data[k] for k in DATA_KEYS}, "hw": hw, "metrics": _plain(metrics or {}),
            "config": _plain(config or {}), "provenance": _plain(prov or provenance("cpu")),
            DIGEST_KEY: state_digest(weights)}
    if shapes:
        ckpt["shapes"] = shapes
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(ckpt, path)
    return path


def state_digest(state_dict: Mapping[str, torch.Tensor]) -> str:
    """sha256 (hex) over each tensor's name, dtype, shape and bytes, in name order: equal weights
    give equal digests whatever the dict order, memory layout or device."""
    sha = hashlib.sha256()
    for name in sorted(state_dict):
        t = state_dict[name].detach().cpu().contiguous()
        flat = t.reshape(-1).view(torch.uint8)  # raw bytes of any dtype (bfloat16, bool, ...)
        # The header fixes the byte count, so no two different dicts hash the same stream.
        header = json.dumps([name, str(t.dtype), list(t.shape), flat.numel()])
        sha.update(header.encode() + b"\n")
        sha.update(flat.numpy())
    return sha.hexdigest()


def read_checkpoint(path: str | Path) -> dict[str, Any]:
    """The checkpoint's contents: ``torch.load(weights_only=True)``, tensors and plain data only,
    never code. The file must be a complete ``hwnas-checkpoint/1`` whose weights match its
    ``state_dict_sha256``; one without a digest (older) loads with a warning."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError.one("checkpoint", "file must exist", str(path),
                              "run `hwnas export runs/<study>` first, or fix the path")
    ckpt = load_torch_file(path, where="checkpoint", fix=_REEXPORT)
    _check_fields(path, ckpt)
    _verify(path, ckpt)
    return ckpt


def load_torch_file(path: str | Path, *, where: str, fix: str,
                    map_location: str | None = "cpu") -> Any:
    """``torch.load(path, weights_only=True)``, or a ``ConfigError`` that says what the file is
    instead (missing, empty, text, truncated, not a torch archive, needs unpickling). ``where``
    names the file's role in the error and ``fix`` how to get a good one."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError.one(where, "file must exist", str(path), fix)
    _check_archive(path, where, fix)
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as err:
        raise ConfigError.one(
            where, "must load with torch.load(weights_only=True): tensors and plain data "
            "only (hwnas never unpickles objects from a file it is given)",
            f"{path}: {_first(err)}", fix) from None
    except Exception as err:  # noqa: BLE001  torch's reader raises many types on a damaged archive
        raise ConfigError.one(
            where, "must be a readable torch.save archive",
            f"{path}: a zip archive whose contents cannot be read by torch.load "
            f"({type(err).__name__}: {_first(err)})", fix) from None


def _check_archive(path: Path, where: str, fix: str) -> None:
    """Refuse what is no complete zip archive before torch reads it: torch's own errors for these
    (EOFError, KeyError, a miniz message) do not say what is wrong with the file."""
    size = path.stat().st_size
    with path.open("rb") as f:
        head = f.read(64)
    if head.startswith(_ZIP_MAGIC):
        if zipfile.is_zipfile(path):
            return
        raise ConfigError.one(
            where, "must be a complete torch.save archive",
            f"{path}: {size} bytes, the archive's end is missing (truncated: a write or copy "
            "that stopped early)", fix)
    raise ConfigError.one(where, "must be a file written by torch.save (a zip archive)",
                          f"{path}: {_describe(head, size)}", fix)


def _describe(head: bytes, size: int) -> str:
    if size == 0:
        return "an empty file (0 bytes)"
    for cut in range(4):  # the head may end inside a multi-byte character
        try:
            text = head[:len(head) - cut].decode()
        except UnicodeDecodeError:
            continue
        if all(c.isprintable() or c.isspace() for c in text):
            return f"text starting {text[:24]!r} ({size} bytes)"
        break
    return f"{size} bytes of binary data that is no zip archive"


def _check_fields(path: Path, ckpt: Any) -> None:
    """A dict of this format with every field of the right kind; all problems at once."""
    fix = "export it with `hwnas export` (or search_spaces.checkpoint.save_checkpoint)"
    if not isinstance(ckpt, dict):
        raise ConfigError.one("checkpoint", f"must be a {FORMAT} dict",
                              f"{path}: a {type(ckpt).__name__}", fix)
    if "format" not in ckpt and ckpt and all(isinstance(v, torch.Tensor) for v in ckpt.values()):
        raise ConfigError.one(
            "checkpoint", f"must be a {FORMAT} dict (weights plus the space, arch and data that "
            "rebuild the net)", f"{path}: a bare state_dict ({len(ckpt)} tensors)",
            "wrap it: search_spaces.checkpoint.save_checkpoint(path, space=..., arch=..., "
            "state_dict=..., data=...)")
    if ckpt.get("format") != FORMAT:
        raise ConfigError.one("checkpoint", f"format must be {FORMAT}",
                              f"{path}: format {ckpt.get('format')!r}", fix)
    problems = [Problem(f"checkpoint {k!r}", "field must be present", f"{path}: absent", fix)
                for k in _FIELDS if k not in ckpt]
    problems += _kind_problems(path, ckpt, fix)
    if problems:
        raise ConfigError(problems)


def _kind_problems(path: Path, ckpt: dict[str, Any], fix: str) -> list[Problem]:
    out = []
    state = ckpt.get("state_dict", {})
    if not isinstance(state, dict) or not all(isinstance(k, str) and isinstance(v, torch.Tensor)
                                              for k, v in state.items()):
        out.append(Problem("checkpoint 'state_dict'", "must map names to tensors",
                           f"{path}: {_kinds(state)}", fix))
    data = ckpt.get("data", dict.fromkeys(DATA_KEYS))  # an absent field is reported once
    missing = [k for k in DATA_KEYS if not isinstance(data, dict) or k not in data]
    if missing:
        out.append(Problem("checkpoint 'data'", f"must give {', '.join(DATA_KEYS)}",
                           f"{path}: missing {missing}", fix))
    out += [Problem(f"checkpoint {k!r}", "must be a string", f"{path}: {ckpt[k]!r}", fix)
            for k in ("space", "arch") if k in ckpt and not isinstance(ckpt[k], str)]
    return out


def _kinds(state: Any) -> str:
    if not isinstance(state, dict):
        return f"a {type(state).__name__}"
    bad = {str(k): type(v).__name__ for k, v in state.items() if not isinstance(v, torch.Tensor)}
    return f"non-tensor entries {dict(list(bad.items())[:3])}"


def _verify(path: Path, ckpt: dict[str, Any]) -> None:
    stored = ckpt.get(DIGEST_KEY)
    if stored is None:
        warnings.warn(f"{path}: no {DIGEST_KEY} (written before checkpoints carried one), so its "
                      "weights cannot be verified; save it again with this hwnas to add one",
                      UnverifiedCheckpointWarning, stacklevel=3)
        return
    if not (isinstance(stored, str) and len(stored) == 64
            and all(c in "0123456789abcdef" for c in stored)):
        raise ConfigError.one(f"checkpoint {DIGEST_KEY!r}", "must be a sha256 in hex (64 digits)",
                              f"{path}: {stored!r}", _REEXPORT)
    actual = state_digest(ckpt["state_dict"])
    if actual != stored:
        raise ConfigError.one(
            "checkpoint weights", f"must match the {DIGEST_KEY} stored when the file was written",
            f"{path}: stored {stored[:12]}..., weights hash to {actual[:12]}...; the file was "
            "changed or damaged after it was written", _REEXPORT)


def _first(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def _plain(value: Any) -> Any:
    """JSON-level data only (what ``weights_only=True`` loads): other objects become strings."""
    return json.loads(json.dumps(value, default=str))
