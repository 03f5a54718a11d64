"""Export Pareto models: checkpoint, ONNX checked against PyTorch, and a model card.

The checkpoint (``model.pt``) is ``hwnas-checkpoint/1`` (``hwnas.common.checkpoint``), written
and read back as a model by ``search_spaces.checkpoint``.

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

import numpy as np
import onnxruntime as ort
import torch
from torch import nn

from hwnas.common.provenance import provenance
from nas.results.cards import write_card
from search_spaces.checkpoint import save_checkpoint

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def candidate_dirname(attrs: dict) -> str:
    """The export folder of a trial's candidate (its user attributes): the arch, plus the
    sampled hardware's string where the study searched it (one arch, two chips: two models)."""
    hardware = (attrs.get("info") or {}).get("hardware")
    return arch_dirname(attrs["arch"] + (f"__{hardware}" if hardware else ""))


def arch_dirname(arch: str, max_len: int = 96) -> str:
    """A folder name for ``arch``: safe characters only, plus a short hash when anything was
    replaced or cut, so that two different arch strings never share a folder."""
    safe = _UNSAFE.sub("_", arch).strip("_.") or "arch"
    if safe == arch and len(safe) <= max_len:
        return safe
    digest = hashlib.sha1(arch.encode()).hexdigest()[:8]
    return f"{safe[:max_len]}-{digest}"


def export_onnx(model: nn.Module, path: str | Path, input_shape: tuple[int, ...], *,
                tolerance: float = 1e-4, seed: int = 0) -> dict[str, Any]:
    """ONNX with a dynamic batch axis, then onnxruntime vs PyTorch on a random batch of 4."""
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
