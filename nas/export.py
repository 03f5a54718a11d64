"""Export Pareto models: checkpoint, ONNX checked against PyTorch, and a model card.

Checkpoint format ``hwnas-checkpoint/1`` (``model.pt``)::

    {"format", "space", "arch", "state_dict", "data": {name, in_chans, num_classes, img_size},
     "hw", "metrics", "config", "provenance"}   (+ "module" when the net is not space.build(arch),
                                                   e.g. after structured pruning)

``export_model`` writes one model's folder and is reused by ``hwnas finalize``;
``export_study`` exports every feasible Pareto model of a study to ``runs/<study>/pareto/``.
"""

from __future__ import annotations

import hashlib
import json
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
    """Write a ``hwnas-checkpoint/1`` file; ``module`` stores the whole net when it cannot be
    rebuilt from ``arch`` (pruned models)."""
    missing = [k for k in ("name", "in_chans", "num_classes", "img_size") if k not in data]
    if missing:
        raise ConfigError.one("checkpoint data", "must give name, in_chans, num_classes, img_size",
                              missing, "pass the DataSplits fields")
    ckpt = {"format": FORMAT, "space": space, "arch": arch,
            "state_dict": {k: v.detach().cpu() for k, v in state_dict.items()},
            "data": {k: data[k] for k in ("name", "in_chans", "num_classes", "img_size")},
            "hw": hw, "metrics": dict(metrics or {}), "config": dict(config or {}),
            "provenance": dict(prov or provenance("cpu"))}
    if module is not None:
        ckpt["module"] = module.cpu()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(ckpt, path)
    return path


def load_checkpoint(path: str | Path) -> tuple[nn.Module, dict[str, Any]]:
    """``(model in eval mode, meta)``; meta is the checkpoint without the weights."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError.one("checkpoint", "file must exist", str(path),
                              "run `hwnas export runs/<study>` first, or fix the path")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception:  # noqa: BLE001 - a stored module needs full unpickling (own files only)
        ckpt = torch.load(path, map_location="cpu", weights_only=False)
    if not isinstance(ckpt, dict) or ckpt.get("format") != FORMAT:
        found = ckpt.get("format") if isinstance(ckpt, dict) else type(ckpt).__name__
        raise ConfigError.one("checkpoint", f"format must be {FORMAT}", found,
                              "export it with `hwnas export` (or nas.export.save_checkpoint)")
    if "module" in ckpt:
        model = ckpt["module"]
    else:
        from search_spaces import get_space

        d = ckpt["data"]
        model = get_space(ckpt["space"]).build(ckpt["arch"], in_chans=d["in_chans"],
                                               num_classes=d["num_classes"],
                                               img_size=d["img_size"])
    model.load_state_dict(ckpt["state_dict"])
    meta = {k: v for k, v in ckpt.items() if k not in ("state_dict", "module")}
    return model.eval(), meta


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
    from nas.cards import write_card

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
