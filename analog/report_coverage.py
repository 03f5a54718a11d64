"""Coverage for the report: every compute layer, analog or digital and why, as shares of the
model's weights and MACs (``analog.coverage`` decides what aihwkit maps)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import Tensor, nn

from analog.coverage import _count_macs, is_compute_layer, is_mappable, split_layers


def _reason(module: nn.Module, name: str, kept: set[str]) -> str:
    if name in kept:
        return "kept digital (recommended or asked for)"
    groups = getattr(module, "groups", 1)
    if groups != 1:
        return f"grouped/depthwise conv (groups={groups}): aihwkit maps only groups=1"
    cls = type(module)
    return (f"{cls.__module__}.{cls.__qualname__} is a subclass, not exactly nn.Linear/nn.Conv "
            "(aihwkit converts exact classes)")


def coverage_table(model: nn.Module, example: Tensor,
                   digital: Sequence[str] = ()) -> dict[str, Any]:
    """Per compute layer: status (analog / digital / unsupported), reason, weights, MACs; and the
    shares of all weights and MACs in each status (the rest of the model is ``other``)."""
    analog, _ = split_layers(model, digital)
    kept = set(split_layers(model)[0]) - set(analog)
    macs, total_macs = _count_macs(model, example[:1])
    total_w = max(sum(p.numel() for p in model.parameters()), 1)
    rows = []
    for name, m in model.named_modules():
        if not is_compute_layer(m):
            continue
        status = "analog" if name in analog else "digital" if is_mappable(m) else "unsupported"
        rows.append({"layer": name, "type": type(m).__name__, "status": status,
                     "reason": "" if status == "analog" else _reason(m, name, kept),
                     "weights": m.weight.numel(), "macs": macs.get(name, 0)})
    shares = {}
    for status in ("analog", "digital", "unsupported"):
        sel = [r for r in rows if r["status"] == status]
        shares[status] = {"layers": len(sel),
                          "weight_share": sum(r["weights"] for r in sel) / total_w,
                          "mac_share": sum(r["macs"] for r in sel) / total_macs}
    shares["other"] = {"layers": 0,
                       "weight_share": 1 - sum(v["weight_share"] for v in shares.values()),
                       "mac_share": 1 - sum(v["mac_share"] for v in shares.values())}
    return {"layers": rows, "shares": shares, "total_weights": total_w,
            "total_macs": total_macs}
