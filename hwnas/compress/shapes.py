"""Save and restore the shapes of a structurally pruned model without pickling the module.

A pruned model is no longer ``space.build(arch)``: its tensors are narrower and a few module
attributes changed (``Conv2d.groups`` of depthwise convs, ``LayerNorm.normalized_shape``, timm
``Attention.num_heads/head_dim/attn_dim/scale``). Structured pruning changes nothing else, so the
pair (attribute diff against a fresh build, state dict) is enough to rebuild the module: build the
arch afresh, :func:`apply_spec`, then ``load_state_dict``. The diff is plain data (ints, floats,
tuples), so checkpoints stay loadable with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

# Attributes held by torch modules that are not architecture (the train flag, hooks).
_SKIP = frozenset({"training"})


def _plain(value: Any) -> bool:
    if isinstance(value, bool | int | float | str) or value is None:
        return True
    if isinstance(value, tuple | list):
        return all(isinstance(v, bool | int | float | str) for v in value)
    return False


def module_attrs(module: nn.Module) -> dict[str, Any]:
    """The public plain-data attributes a module keeps in its ``__dict__``."""
    return {k: v for k, v in vars(module).items()
            if not k.startswith("_") and k not in _SKIP and _plain(v)}


def shape_spec(model: nn.Module, reference: nn.Module) -> dict[str, dict[str, Any]]:
    """Attributes of ``model`` that differ from ``reference`` (a fresh build of the same arch).

    Returns ``{module_name: {attr: value}}``; tuples are stored as lists (JSON-friendly) and turned
    back into the reference's type on restore.
    """
    ref = dict(reference.named_modules())
    spec: dict[str, dict[str, Any]] = {}
    for name, module in model.named_modules():
        base = module_attrs(ref[name]) if name in ref else {}
        diff = {k: (list(v) if isinstance(v, tuple) else v)
                for k, v in module_attrs(module).items() if base.get(k, object()) != v}
        if diff:
            spec[name] = diff
    return spec


def _resize(model: nn.Module, key: str, shape: torch.Size) -> None:
    owner_name, _, leaf = key.rpartition(".")
    owner = model.get_submodule(owner_name)
    if leaf in owner._parameters and owner._parameters[leaf] is not None:
        old = owner._parameters[leaf]
        owner._parameters[leaf] = nn.Parameter(old.new_empty(shape), old.requires_grad)
    elif leaf in owner._buffers and owner._buffers[leaf] is not None:
        owner._buffers[leaf] = owner._buffers[leaf].new_empty(shape)


def apply_spec(model: nn.Module, spec: Mapping[str, Mapping[str, Any]],
               state_dict: Mapping[str, torch.Tensor]) -> nn.Module:
    """Turn a fresh build into the pruned module's shape, then load ``state_dict`` into it."""
    modules = dict(model.named_modules())
    for name, attrs in spec.items():
        module = modules[name]
        for attr, value in attrs.items():
            old = getattr(module, attr, None)
            setattr(module, attr, tuple(value) if isinstance(old, tuple) else value)
    current = model.state_dict()
    for key, tensor in state_dict.items():
        if key in current and current[key].shape != tensor.shape:
            _resize(model, key, tensor.shape)
    model.load_state_dict(state_dict)
    return model
