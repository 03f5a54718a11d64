"""Export Pareto models: checkpoint, ONNX checked against PyTorch, and a model card.

Checkpoint format ``hwnas-checkpoint/1`` (``model.pt``)::

    {"format", "space", "arch", "state_dict", "data": {name, in_chans, num_classes, img_size},
     "hw", "metrics", "config", "provenance"}   (+ "shapes" when the net is not space.build(arch),
                                                   e.g. after structured pruning)

Everything but the tensors is plain data (str, int, float, list, dict), so a checkpoint loads with
``torch.load(weights_only=True)`` and no code runs at load time. A pruned net is stored as its
attribute diff against a fresh ``space.build(arch)`` (``hwnas.compress.shapes``) and rebuilt from
that; a file that needs full unpickling (a pickled module, or anything built to run code) is
refused with a clear error.

``export_model`` writes one model's folder and is reused by ``hwnas finalize``;
``export_study`` exports every feasible Pareto model of a study to ``runs/<study>/pareto/``.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import re
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import nn

from hwnas.common.errors import ConfigError
from hwnas.common.provenance import provenance

FORMAT = "hwnas-checkpoint/1"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def arch_dirname(arch: str, max_len: int = 96) -> str:
    """A folder name for ``arch``: safe characters only, plus a short hash when anything was
    replaced or cut, so that two different arch strings never share a folder."""
    safe = _UNSAFE.sub("_", arch).strip("_.") or "arch"
    if safe == arch and len(safe) <= max_len:
        return safe
    digest = hashlib.sha1(arch.encode()).hexdigest()[:8]
    return f"{safe[:max_len]}-{digest}"


def save_checkpoint(path: str | Path, *, space: str, arch: str, state_dict: dict[str, Any],
                    data: dict[str, Any], hw: str = "digital", metrics: dict | None = None,
                    config: dict | None = None, prov: dict | None = None,
                    module: nn.Module | None = None) -> Path:
    """Write a ``hwnas-checkpoint/1`` file; ``module`` (a net that is not ``space.build(arch)``,
    e.g. pruned) is stored as its shape diff against a fresh build, never pickled."""
    missing = [k for k in ("name", "in_chans", "num_classes", "img_size") if k not in data]
    if missing:
        raise ConfigError.one("checkpoint data", "must give name, in_chans, num_classes, img_size",
                              missing, "pass the DataSplits fields")
    data = {k: data[k] for k in ("name", "in_chans", "num_classes", "img_size")}
    ckpt = {"format": FORMAT, "space": space, "arch": arch,
            "state_dict": {k: v.detach().cpu() for k, v in state_dict.items()},
            "data": data, "hw": hw, "metrics": _plain(metrics or {}),
            "config": _plain(config or {}), "provenance": _plain(prov or provenance("cpu"))}
    if module is not None:
        ckpt["shapes"] = _shapes(module, _build(space, arch, data))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(ckpt, path)
    return path


def _shapes(module: nn.Module, fresh: nn.Module) -> dict[str, Any]:
    """The attribute diff that turns ``fresh`` into ``module`` (a reshaped copy of it)."""
    from hwnas.compress.shapes import shape_spec

    if module.state_dict().keys() != fresh.state_dict().keys():
        raise ConfigError.one(
            "checkpoint module", "must be space.build(arch) with changed widths (structured "
            "pruning): other nets cannot be rebuilt without unpickling code",
            type(module).__name__, "save the arch's own model, or register a space that builds "
            "this net")
    return shape_spec(module, fresh)


def _plain(value: Any) -> Any:
    """JSON-level data only (what ``weights_only=True`` loads): other objects become strings."""
    return json.loads(json.dumps(value, default=str))


def _build(space: str, arch: str, data: dict[str, Any]) -> nn.Module:
    from search_spaces import get_space

    with torch.random.fork_rng(devices=[]):  # the weights are overwritten: leave the RNG as is
        return get_space(space).build(arch, in_chans=data["in_chans"],
                                      num_classes=data["num_classes"], img_size=data["img_size"])


def _read(path: Path) -> dict[str, Any]:
    """``torch.load(weights_only=True)``: tensors and plain data only, never code."""
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
                              "(or nas.results.export.save_checkpoint)")
    return ckpt


def load_checkpoint(path: str | Path) -> tuple[nn.Module, dict[str, Any]]:
    """``(model in eval mode, meta)``; meta is the checkpoint without the weights."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError.one("checkpoint", "file must exist", str(path),
                              "run `hwnas export runs/<study>` first, or fix the path")
    ckpt = _read(path)
    model = _build(ckpt["space"], ckpt["arch"], ckpt["data"])
    if ckpt.get("shapes"):
        from hwnas.compress.shapes import apply_spec

        apply_spec(model, ckpt["shapes"], ckpt["state_dict"])
    else:
        model.load_state_dict(ckpt["state_dict"])
    meta = {k: v for k, v in ckpt.items() if k != "state_dict"}
    return model.eval(), meta


def load_model(*, path: str, device: str = "cpu") -> nn.Module:
    """The model of a checkpoint, in train mode on ``device``: the ``model_factory`` of
    ``hwnas.train.ddp`` jobs (``"nas.results.export:load_model"``)."""
    return load_checkpoint(path)[0].to(device).train()


def export_onnx(model: nn.Module, path: str | Path, input_shape: tuple[int, ...], *,
                tolerance: float = 1e-4, seed: int = 0) -> dict[str, Any]:
    """ONNX with a dynamic batch axis, then onnxruntime vs PyTorch on a random batch of 4."""
    import numpy as np
    import onnxruntime as ort

    model = model.eval().cpu()
    path = Path(path)
    x = torch.randn(2, *input_shape)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:  # the torch.export-based exporter first; the TorchScript one if it cannot trace
            torch.onnx.export(model, (x,), str(path), dynamo=True, input_names=["input"],
                              output_names=["logits"], verbose=False, external_data=False,
                              dynamic_shapes=({0: torch.export.Dim("batch")},))
            exporter = "dynamo"
        except Exception:  # noqa: BLE001
            torch.onnx.export(model, (x,), str(path), dynamo=False, input_names=["input"],
                              output_names=["logits"],
                              dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})
            exporter = "torchscript"
    gen = torch.Generator().manual_seed(seed)
    x4 = torch.randn(4, *input_shape, generator=gen)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = sess.run(None, {sess.get_inputs()[0].name: x4.numpy()})[0]
    with torch.inference_mode():
        ref = model(x4).numpy()
    diff = float(np.abs(got - ref).max())
    scale = max(1.0, float(np.abs(ref).max()))
    return {"file": path.name, "exporter": exporter, "max_abs_diff": diff,
            "tolerance": tolerance * scale, "ok": diff <= tolerance * scale,
            "checked_batch": 4, "onnxruntime": ort.__version__}


def export_model(model: nn.Module, out_dir: str | Path, *, space: str, arch: str,
                 data: dict[str, Any], hw: str, metrics: dict[str, Any],
                 config: dict[str, Any], card: dict[str, Any], onnx: bool = True,
                 tolerance: float = 1e-4, module: nn.Module | None = None) -> dict[str, Any]:
    """One model folder: ``model.pt``, ``model.onnx`` (checked), ``card.json``, ``card.md``."""
    from nas.results.cards import write_card

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    prov = provenance("cpu", study=config.get("name"))
    save_checkpoint(out / "model.pt", space=space, arch=arch, state_dict=model.state_dict(),
                    data=data, hw=hw, metrics=metrics, config=config, prov=prov, module=module)
    card = {**card, "files": {"checkpoint": "model.pt"}, "provenance": prov}
    if onnx:
        shape = (data["in_chans"], data["img_size"], data["img_size"])
        card["onnx"] = export_onnx(model, out / "model.onnx", shape, tolerance=tolerance)
        card["files"]["onnx"] = "model.onnx"
    write_card(out, card)
    return card


def read_card(folder: str | Path) -> dict[str, Any]:
    return json.loads((Path(folder) / "card.json").read_text())
