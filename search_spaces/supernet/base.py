"""The weight-sharing contract: one bank of shared tensors, sub-networks as views of it.

A supernet holds a *bank*: for every tensor any sub-network of the space needs, one tensor of the
largest shape any sub-network uses. A sub-network ``arch`` is the space's own model
``space.build(arch)``; each of its parameters and buffers is *derived* from one bank tensor
(``bank_key`` names it; ``derive`` cuts it: by default the leading block of the needed shape,
OFA/BigNAS channel slicing). ``forward`` runs the active sub-network with
``torch.func.functional_call`` on a cached, weightless (meta-device) copy of that model, so the
gradient of every step reaches the shared bank, and ``extract(arch)`` loads the same derived
tensors into a fresh ``space.build(arch)``. Both paths compute one function by construction, and
the extracted model has the space's structure exactly: latency, analog conversion, pruning,
export and finalize treat it like any trained candidate.

BatchNorm running statistics are views of bank buffers too, so they mix over sub-networks while
training; a sub-network is scored only after ``recalibrate_bn`` (BigNAS).
"""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any, ClassVar

import torch
from torch import nn
from torch.func import functional_call

from hwnas.common.errors import ConfigError
from search_spaces.base import ArchError, SearchSpace, get_space

_NORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)
_SKELETONS = 32  # sub-network skeletons kept (meta device: structure only, no memory)


def _bank_name(key: str) -> str:
    return key.replace(".", "~")  # nn.ParameterDict names may not contain dots


def leading(t: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """The leading block of ``t`` with ``shape`` (a view: in-place BN updates reach the bank)."""
    if t.dim() == 0:
        return t
    return t[tuple(slice(0, n) for n in shape)]


class Supernet(nn.Module):
    """A weight-sharing model over every architecture of one search space.

    Subclasses set ``space_name`` and list ``cover_archs`` (sub-networks that together hold every
    tensor at its largest shape), ``largest``/``smallest`` (the sandwich rule's ends) and may
    override ``bank_key`` and ``derive``. ``weight_noise`` > 0 injects HWA weight noise while
    training (Gaussian, per output channel, relative to the channel's max |w|).
    """

    space_name: ClassVar[str]

    def __init__(self, *, in_chans: int, num_classes: int, img_size: int):
        super().__init__()
        self.space: SearchSpace = get_space(self.space_name)
        self.shape = {"in_chans": in_chans, "num_classes": num_classes, "img_size": img_size}
        self.params = nn.ParameterDict()
        self.weight_noise = 0.0
        self._skeletons: OrderedDict[str, nn.Module] = OrderedDict()
        self.active: str = self.largest()
        self._fill_bank()
        self.add_extra_parameters()

    # -- what a space supplies ------------------------------------------------------------
    def cover_archs(self) -> list[str]:
        return [self.largest()]

    def largest(self) -> str:
        raise NotImplementedError

    def smallest(self) -> str:
        raise NotImplementedError

    def bank_key(self, arch: str, spec: dict[str, Any], key: str) -> str:
        """Name of the bank tensor that sub-network tensor ``key`` of ``arch`` is cut from."""
        return key

    def derive(self, bank_key: str, bank: torch.Tensor, shape: torch.Size) -> torch.Tensor:
        """The sub-network's tensor from its bank tensor (default: the leading block)."""
        return leading(bank, shape)

    def add_extra_parameters(self) -> None:
        """Register parameters that are not in any sub-network (e.g. kernel transforms)."""

    # -- the bank ---------------------------------------------------------------------------
    def build_sub(self, arch: str) -> nn.Module:
        return self.space.build(arch, **self.shape)

    def _fill_bank(self) -> None:
        """Every bank tensor at its largest shape, initialised as the space initialises it."""
        buffers: dict[str, torch.Tensor] = {}
        for arch in self.cover_archs():
            model, spec = self.build_sub(arch), self.space.decode(arch)
            names = dict(model.named_parameters())
            for key, t in model.state_dict().items():
                bk = self.bank_key(arch, spec, key)
                old = self.params[_bank_name(bk)] if _bank_name(bk) in self.params \
                    else buffers.get(bk)
                if old is not None and t.numel() <= old.numel():
                    continue
                if key in names:
                    self.params[_bank_name(bk)] = nn.Parameter(t.detach().clone())
                else:
                    buffers[bk] = t.detach().clone()
        for bk, t in buffers.items():
            self.register_buffer("buf~" + _bank_name(bk), t)

    def bank(self, bank_key: str) -> torch.Tensor:
        name = _bank_name(bank_key)
        if name in self.params:
            return self.params[name]
        return self.get_buffer("buf~" + name)

    # -- sub-networks -----------------------------------------------------------------------
    def check(self, arch: str) -> dict[str, Any]:
        """The spec of ``arch``; an ``ArchError`` naming the supernet when it is not covered."""
        try:
            return self.space.decode(arch)
        except ArchError as err:
            raise ConfigError.one(
                f"{self.space_name} supernet", "covers only archs of its own space",
                arch, f"pass an arch of the {self.space_name} space ({err.problems[0].rule})"
            ) from None

    def activate(self, arch: str) -> str:
        """Make ``arch`` the sub-network that ``forward`` runs."""
        self.check(arch)
        self.active = arch
        return arch

    def skeleton(self, arch: str) -> nn.Module:
        if arch not in self._skeletons:
            with torch.device("meta"):
                self._skeletons[arch] = self.build_sub(arch)
            if len(self._skeletons) > _SKELETONS:
                self._skeletons.popitem(last=False)
        self._skeletons.move_to_end(arch)
        return self._skeletons[arch]

    def sub_tensors(self, arch: str, skeleton: nn.Module) -> dict[str, torch.Tensor]:
        """Every parameter and buffer of sub-network ``arch``, derived from the bank."""
        spec = self.check(arch)
        out = {}
        for key, t in skeleton.state_dict(keep_vars=True).items():
            bk = self.bank_key(arch, spec, key)
            try:
                bank = self.bank(bk)
            except AttributeError:
                raise ConfigError.one(f"{self.space_name} supernet", "must hold every tensor "
                                      "of its sub-networks", f"{arch}: {key} -> {bk}",
                                      "add an arch that has it to cover_archs()") from None
            out[key] = self.derive(bk, bank, t.shape)
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skeleton = self.skeleton(self.active)
        skeleton.train(self.training)
        tensors = self.sub_tensors(self.active, skeleton)
        if self.training and self.weight_noise > 0:
            tensors = {k: self._noisy(k, t) for k, t in tensors.items()}
        return functional_call(skeleton, tensors, (x,))

    def _noisy(self, key: str, w: torch.Tensor) -> torch.Tensor:
        """HWA: ``w`` plus Gaussian noise of std ``weight_noise`` x the channel's max |w|."""
        if not key.endswith("weight") or w.dim() < 2:
            return w
        scale = w.detach().abs().flatten(1).amax(1).view(-1, *([1] * (w.dim() - 1)))
        return w + torch.randn_like(w) * (self.weight_noise * scale)

    @torch.no_grad()
    def extract(self, arch: str) -> nn.Module:
        """``space.build(arch)`` holding the inherited weights and BN statistics."""
        self.check(arch)
        model = self.build_sub(arch)
        tensors = self.sub_tensors(arch, model)
        model.load_state_dict({k: t.detach().clone() for k, t in tensors.items()})
        return model.train(self.training)

    def random_arch(self, rng: random.Random) -> str:
        return self.space.random_arch(rng)

    def sandwich(self, rng: random.Random, k: int) -> Iterator[str]:
        """The sandwich rule: largest, smallest, then ``k`` random sub-networks."""
        yield self.largest()
        yield self.smallest()
        for _ in range(k):
            yield self.random_arch(rng)

    def describe(self) -> dict[str, Any]:
        """Plain metadata that identifies this supernet (stored in checkpoints)."""
        return {"space": self.space_name, **self.shape}


@torch.no_grad()
def recalibrate_bn(model: nn.Module, x: torch.Tensor, *, batch_size: int = 250) -> int:
    """Re-estimate every BatchNorm's running statistics of ``model`` on images ``x`` (cumulative
    average over the batches, BigNAS); returns the number of BN layers reset. Eval mode after."""
    norms = [m for m in model.modules() if isinstance(m, _NORMS)]
    saved = [m.momentum for m in norms]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # cumulative moving average: every batch weighs the same
    model.train()
    for i in range(0, len(x), batch_size):
        model(x[i:i + batch_size])
    for m, momentum in zip(norms, saved, strict=True):
        m.momentum = momentum
    model.eval()
    return len(norms)
