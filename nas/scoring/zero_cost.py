"""Zero-cost proxies: scores of an untrained network, free next to any training recipe.

Both are computed on the model exactly as a study would build it (its seeded initialisation),
without training, on one batch of training images:

- ``synflow`` (Tanaka et al., NeurIPS 2020; as a NAS proxy, Abdelfattah et al., ICLR 2021):
  the sum over parameters of ``|theta * dR/dtheta|``, with ``R`` the sum of the outputs of the
  network whose weights are replaced by their absolute values, fed an all-ones input. It needs
  no labels and no data values (only their shape), in float64 so deep nets do not overflow.
- ``naswot`` (Mellor et al., ICML 2021): ``log|det K|`` of the kernel of binary ReLU activation
  codes over a batch, ``K[i, j]`` = number of ReLU units on which images ``i`` and ``j`` agree.
  Networks that keep different images apart at initialisation score higher.

They are baselines for the fidelity benchmark: a scoring recipe that a free proxy matches is
not worth its seconds.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable

import torch
from torch import nn

from hwnas.common.errors import ConfigError


def synflow(model: nn.Module, input_shape: tuple[int, ...]) -> float:
    """SynFlow score of ``model`` (not modified: the proxy runs on a float64 copy)."""
    net = copy.deepcopy(model).double().eval()  # eval: batch norm as at init, no batch stats
    with torch.no_grad():
        for p in net.parameters():
            p.abs_()
    net.zero_grad()
    out = net(torch.ones(1, *input_shape, dtype=torch.float64))
    out.sum().backward()
    total = sum(float((p.detach() * p.grad).abs().sum()) for p in net.parameters()
                if p.grad is not None)
    return math.log(total) if total > 0 else float("-inf")  # log: scores span many decades


def naswot(model: nn.Module, images: torch.Tensor) -> float:
    """NASWOT score: log-determinant of the ReLU-code agreement kernel over ``images``."""
    if images.shape[0] < 2:
        raise ConfigError.one("naswot images", "needs a batch of at least 2 images",
                              images.shape[0], "pass a batch of e.g. 64 training images")
    net = copy.deepcopy(model).float().eval()
    n = images.shape[0]
    kernel = torch.zeros(n, n, dtype=torch.float64)
    hooks = [m.register_forward_hook(_code_hook(kernel)) for m in net.modules()
             if isinstance(m, nn.ReLU)]
    try:
        with torch.no_grad():
            net(images.float())
    finally:
        for h in hooks:
            h.remove()
    return float(torch.linalg.slogdet(kernel).logabsdet)


def _code_hook(kernel: torch.Tensor) -> Callable[..., None]:
    def hook(_module: nn.Module, _inp: object, out: torch.Tensor) -> None:
        codes = (out.detach().flatten(1) > 0).double()
        kernel.add_(codes @ codes.T + (1 - codes) @ (1 - codes).T)
    return hook


PROXIES: dict[str, str] = {"synflow": "log SynFlow at initialisation",
                           "naswot": "NASWOT log-determinant at initialisation"}

PRIORS: dict[str, str] = {**PROXIES, "params": "log parameter count"}
"""The free scores a successive-halving rung 0 can rank by (``schedule.prior``): higher is
better for each."""

PRIOR_IMAGES = 64
"""Training images NASWOT's kernel is computed over (as ``bench.fidelity.baselines``)."""


def prior_images(x_train: torch.Tensor, seed: int) -> torch.Tensor:
    """The ``PRIOR_IMAGES`` training images a prior sees under ``seed`` (a seeded draw)."""
    gen = torch.Generator().manual_seed(seed)
    return x_train[torch.randperm(len(x_train), generator=gen)[:PRIOR_IMAGES]]


def prior_score(name: str, model: nn.Module, images: torch.Tensor) -> float:
    """The free score ``name`` (``PRIORS``) of an untrained ``model``; ``images``: a batch of
    training images (NASWOT reads their values, SynFlow only their shape)."""
    if name == "synflow":
        return synflow(model, tuple(images.shape[1:]))
    if name == "naswot":
        return naswot(model, images)
    if name == "params":
        return math.log(sum(p.numel() for p in model.parameters()))
    raise ConfigError.one("schedule.prior", f"must be one of {sorted(PRIORS)}", name,
                          "pick one of those")
