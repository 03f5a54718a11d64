"""Models of a space saved as ``hwnas-checkpoint/1`` files (``hwnas.common.checkpoint``) and
rebuilt from them: ``space.build(arch)``, then the stored shape diff (a pruned net) and weights.

``load_model`` is the ``model_factory`` of ``hwnas.train.ddp`` jobs
(``"search_spaces.checkpoint:load_model"``).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from hwnas.common.checkpoint import read_checkpoint, write_checkpoint
from hwnas.common.errors import ConfigError
from hwnas.compress.shapes import apply_spec, shape_spec
from search_spaces.base import get_space


def save_checkpoint(path: str | Path, *, space: str, arch: str, state_dict: dict[str, Any],
                    data: dict[str, Any], hw: str = "digital", metrics: dict | None = None,
                    config: dict | None = None, prov: dict | None = None,
                    module: nn.Module | None = None) -> Path:
    """Write a ``hwnas-checkpoint/1`` file; ``module`` (a net that is not ``space.build(arch)``,
    e.g. pruned) is stored as its shape diff against a fresh build, never pickled."""
    shapes = None if module is None else _shapes(module, _build(space, arch, data))
    return write_checkpoint(path, space=space, arch=arch, state_dict=state_dict, data=data,
                            hw=hw, metrics=metrics, config=config, prov=prov, shapes=shapes)


def _shapes(module: nn.Module, fresh: nn.Module) -> dict[str, Any]:
    """The attribute diff that turns ``fresh`` into ``module`` (a reshaped copy of it)."""
    if module.state_dict().keys() != fresh.state_dict().keys():
        raise ConfigError.one(
            "checkpoint module", "must be space.build(arch) with changed widths (structured "
            "pruning): other nets cannot be rebuilt without unpickling code",
            type(module).__name__, "save the arch's own model, or register a space that builds "
            "this net")
    return shape_spec(module, fresh)


def _build(space: str, arch: str, data: dict[str, Any]) -> nn.Module:
    with torch.random.fork_rng(devices=[]):  # the weights are overwritten: leave the RNG as is
        return get_space(space).build(arch, in_chans=data["in_chans"],
                                      num_classes=data["num_classes"], img_size=data["img_size"])


def load_checkpoint(path: str | Path) -> tuple[nn.Module, dict[str, Any]]:
    """``(model in eval mode, meta)``; meta is the checkpoint without the weights. The file is
    checked first (``read_checkpoint``: complete, plain data, its fields, its sha256); a space,
    arch or weights that do not rebuild a net are a ``ConfigError`` naming the file."""
    ckpt = read_checkpoint(path)
    try:
        model = _build(ckpt["space"], ckpt["arch"], ckpt["data"])
    except ConfigError as err:  # an unknown space or arch: say which file named it
        raise ConfigError([replace(p, where=f"{path}: {p.where}") for p in err.problems]) from None
    _load_weights(model, ckpt, Path(path))
    meta = {k: v for k, v in ckpt.items() if k != "state_dict"}
    return model.eval(), meta


def _load_weights(model: nn.Module, ckpt: dict[str, Any], path: Path) -> None:
    try:
        if ckpt.get("shapes"):
            apply_spec(model, ckpt["shapes"], ckpt["state_dict"])
        else:
            model.load_state_dict(ckpt["state_dict"])
    # load_state_dict raises RuntimeError (missing, unexpected or mis-sized keys); a shape diff
    # naming modules the arch lacks raises KeyError or AttributeError.
    except (RuntimeError, KeyError, AttributeError, ValueError, TypeError) as err:
        found = " ".join(str(err).split())
        raise ConfigError.one(
            "checkpoint weights", "must fit space.build(arch) (with the stored shapes)",
            f"{path}: {ckpt['space']} {ckpt['arch']}: {found[:300]}",
            "the weights belong to another net: export the model again with its own space "
            "and arch (search_spaces.checkpoint.save_checkpoint)") from None


def load_model(*, path: str, device: str = "cpu") -> nn.Module:
    """The model of a checkpoint, in train mode on ``device``: the ``model_factory`` of
    ``hwnas.train.ddp`` jobs (``"search_spaces.checkpoint:load_model"``)."""
    return load_checkpoint(path)[0].to(device).train()
