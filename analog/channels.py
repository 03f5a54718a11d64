"""Dead output channels: all-zero weights on an analog tile, feeding a batch norm.

aihwkit scales each tile column by its largest weight; a column of zeros has nothing to scale
by, keeps the factor 1 and is programmed to zero conductance plus the device's programming and
read noise. Digitally the channel is a constant, so the batch norm after it has a running
variance near zero and divides that noise by about ``sqrt(eps)``: one dead channel can take a
model from 85% to chance. Weight decay can shrink a channel that gets little gradient to exactly
zero; an 842-step HWA run did so to one stem channel. The digital output of such a channel is a
known constant, so the batch norm can emit it without reading the channel at all.
"""

from __future__ import annotations

from torch import Tensor, nn

from analog.coverage import is_mappable

_NORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)


def _pairs(model: nn.Module) -> list[tuple[nn.Module, nn.modules.batchnorm._BatchNorm]]:
    """(mappable layer, batch norm registered right after it with matching width)."""
    out, previous = [], None
    for module in model.modules():
        if isinstance(module, _NORMS) and previous is not None and module.affine \
                and module.running_var is not None:
            width = previous.weight.shape[0]
            if width == module.num_features:
                out.append((previous, module))
        if is_mappable(module):
            previous = module
        elif next(module.children(), None) is None:
            previous = None  # a norm, activation or pooling in between ends the pairing
    return out


def _dead(layer: nn.Module, norm: nn.Module, rel_var: float) -> Tensor:
    """Mask of channels with all-zero weights and a constant input to ``norm``, still read."""
    w = layer.weight.detach().reshape(layer.weight.shape[0], -1)
    return (w == 0).all(dim=1) & (norm.running_var <= rel_var * norm.eps) & (norm.weight != 0)


def dead_channels(model: nn.Module, *, rel_var: float = 1e-6) -> int:
    """How many dead channels ``model`` has whose batch norm still reads them."""
    return sum(int(_dead(layer, norm, rel_var).sum()) for layer, norm in _pairs(model))


def freeze_dead_channels(model: nn.Module, *, rel_var: float = 1e-6) -> int:
    """Make the batch norm emit the constant of every dead channel; returns how many.

    A channel is dead when all its weights are exactly zero and the running variance of the
    batch norm after it is at most ``rel_var * eps`` (its input is constant). The norm's
    scale becomes 0 and its shift the value it produced for that constant, so the digital
    function is unchanged and analog noise on the channel no longer reaches the output.
    """
    frozen = 0
    for layer, norm in _pairs(model):
        dead = _dead(layer, norm, rel_var)
        if not bool(dead.any()):
            continue
        bias = layer.bias.detach() if layer.bias is not None else 0.0
        inv_std = (norm.running_var + norm.eps).rsqrt()
        constant = norm.weight.detach() * (bias - norm.running_mean) * inv_std + norm.bias.detach()
        norm.bias.data[dead] = constant[dead]
        norm.weight.data[dead] = 0.0
        frozen += int(dead.sum())
    return frozen
