"""Any model for an analog experiment: built from a name, loaded from a local weights file.

Model specs (one string, as the CLI's ``--model`` takes it)::

    timm:<name>            timm.create_model(name, pretrained=False, in_chans, num_classes,
                           img_size where the model takes it)
    torchvision:<name>     torchvision.models.get_model(name, weights=None, num_classes)
    <space>:<arch>         an hwnas search space and its architecture string
    <module>:<function>    a factory, called with those of in_chans/num_classes/img_size it takes

Nothing downloads: timm and torchvision models are always built without pretrained weights;
weights come from a local file (``load_weights``): a bare state_dict or a whole checkpoint
(``state_dict``/``model``/``state_dict_ema`` key), torch or safetensors, with ``module.`` and
``_orig_mod.`` prefixes (DDP, torch.compile) stripped. timm's and torchvision's ResNets share key
names, so either's file loads into the other's model.
"""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path
from typing import Any

import torch
from torch import nn

from hwnas.common.checkpoint import FORMAT, load_torch_file
from hwnas.common.errors import ConfigError

SPEC_FORMS = "timm:<name>, torchvision:<name>, <space>:<arch> or <module>:<function>"
_WRAPPERS = ("state_dict", "model", "state_dict_ema", "model_ema", "net")
_PREFIXES = ("module.", "_orig_mod.")
_FIX = ("pass the local .pt/.pth/.safetensors file your training wrote (torch.save of a "
        "state_dict or checkpoint), e.g. --weights runs/model.pt")


def build_model(spec: str, *, in_chans: int, num_classes: int, img_size: int) -> nn.Module:
    """A freshly initialised digital model from ``spec`` (module docstring), in eval mode."""
    kind, sep, name = spec.partition(":")
    if not sep or not kind or not name:
        raise ConfigError.one("--model", f"must be one of {SPEC_FORMS}", spec,
                              "write e.g. --model timm:resnet18")
    shape = {"in_chans": in_chans, "num_classes": num_classes, "img_size": img_size}
    if kind == "timm":
        model = _timm(name, shape)
    elif kind == "torchvision":
        model = _torchvision(name, shape)
    elif _is_space(kind):
        from search_spaces import get_space

        model = get_space(kind).build(name, **shape)
    else:
        model = _factory(kind, name, shape)
    return model.eval()


def _timm(name: str, shape: dict[str, int]) -> nn.Module:
    import timm

    if not timm.is_model(name):
        raise ConfigError.one("--model", "must name a timm model", f"timm:{name}",
                              f"see timm.list_models(), e.g. {timm.list_models('resnet1*')[:3]}")
    kwargs = {"in_chans": shape["in_chans"], "num_classes": shape["num_classes"]}
    try:  # ViTs and a few others take img_size; CNNs refuse it
        return timm.create_model(name, pretrained=False, img_size=shape["img_size"], **kwargs)
    except TypeError:
        return timm.create_model(name, pretrained=False, **kwargs)


def _torchvision(name: str, shape: dict[str, int]) -> nn.Module:
    import torchvision

    if name not in torchvision.models.list_models():
        raise ConfigError.one("--model", "must name a torchvision model", f"torchvision:{name}",
                              "see torchvision.models.list_models()")
    if shape["in_chans"] != 3:
        raise ConfigError.one("--model", "torchvision models take 3 input channels",
                              f"torchvision:{name} on {shape['in_chans']}-channel data",
                              f"use timm:{name} (it takes in_chans) or a 3-channel data set")
    return torchvision.models.get_model(name, weights=None, num_classes=shape["num_classes"])


def _is_space(name: str) -> bool:
    from search_spaces import list_spaces

    return name in list_spaces()


def _factory(module_name: str, func_name: str, shape: dict[str, int]) -> nn.Module:
    try:
        func = getattr(importlib.import_module(module_name), func_name)
    except (ImportError, AttributeError) as err:
        raise ConfigError.one("--model", f"must be one of {SPEC_FORMS}",
                              f"{module_name}:{func_name} ({err})",
                              "check the module is importable (PYTHONPATH) and defines the "
                              "function, or use timm:/torchvision:") from None
    params = inspect.signature(func).parameters
    takes_all = any(p.kind is p.VAR_KEYWORD for p in params.values())
    model = func(**{k: v for k, v in shape.items() if takes_all or k in params})
    if not isinstance(model, nn.Module):
        raise ConfigError.one("--model", "the factory must return a torch nn.Module",
                              f"{module_name}:{func_name} -> {type(model).__name__}",
                              "return the model from the function")
    return model


def read_state_dict(path: str | Path) -> dict[str, torch.Tensor]:
    """The tensors of a weights file (module docstring), unwrapped and with prefixes stripped."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError.one("--weights", "must be an existing local file (nothing downloads)",
                              str(path), _FIX)
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        state: Any = load_file(str(path))
    else:
        state = load_torch_file(path, where="--weights", fix=_FIX)
    return _strip(_unwrap(state, path))


def _unwrap(state: Any, path: Path) -> dict[str, torch.Tensor]:
    if isinstance(state, dict):
        for key in _WRAPPERS:
            if isinstance(state.get(key), dict):
                return _unwrap(state[key], path)
        tensors = {k: v for k, v in state.items() if isinstance(v, torch.Tensor)}
        if tensors:
            return tensors
    raise ConfigError.one("--weights", "must hold a state_dict (tensors by name), bare or "
                          f"under one of {list(_WRAPPERS)}", f"{path}: {type(state).__name__}",
                          "save it with torch.save(model.state_dict(), path)")


def _strip(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    out = {}
    for key, value in state.items():
        for prefix in _PREFIXES:
            while key.startswith(prefix):
                key = key[len(prefix):]
        out[key] = value
    return out


def load_weights(model: nn.Module, path: str | Path) -> nn.Module:
    """``model`` with the weights of ``path`` (strict: every key and shape must match)."""
    state = read_state_dict(path)
    own = model.state_dict()
    missing = sorted(set(own) - set(state))
    extra = sorted(set(state) - set(own))
    shapes = [f"{k} {tuple(state[k].shape)} vs {tuple(v.shape)}" for k, v in own.items()
              if k in state and state[k].shape != v.shape]
    if missing or extra or shapes:
        found = "; ".join(f"{what}: {items[:4]}{' ...' if len(items) > 4 else ''}"
                          for what, items in (("missing", missing), ("unexpected", extra),
                                              ("mis-sized", shapes)) if items)
        raise ConfigError.one("--weights", "must match the model's keys and shapes",
                              f"{path}: {found}", "pass the --model (and --data sizes) the "
                              "weights were trained with")
    model.load_state_dict(state)
    return model.eval()


def is_hwnas_checkpoint(path: str | Path) -> bool:
    """Whether ``path`` is an ``hwnas-checkpoint/1`` file (it names its own space and arch)."""
    path = Path(path)
    if not path.is_file() or path.suffix == ".safetensors":
        return False
    state = load_torch_file(path, where="--weights", fix=_FIX)
    return isinstance(state, dict) and state.get("format") == FORMAT
