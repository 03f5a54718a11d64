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

Three more, label-free, judged against third-party analog truth (AnalogNAS-Bench, HWA accuracy
after drift; ``python -m bench.analognas``, BENCHMARKS.md "analognas_proxies"):

- ``meco`` (Jiang et al., NeurIPS 2023): the sum over conv layers of the minimum eigenvalue of
  the Pearson correlation matrix of the layer's channels, on one image.
- ``zico`` (Li et al., ICLR 2023): the sum over layers of ``log(sum |mean g| / std g)`` of the
  weight gradients over two batches; here with random labels (the label-free variant).
- ``analog_snr`` (this project's): the output's signal-to-noise ratio, in dB, when every conv and
  linear weight gets PCM-like programming noise at initialisation (Gaussian, 3.5% of each
  output channel's largest weight): how much a cell amplifies the weight noise analog tiles add.
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


def meco(model: nn.Module, image: torch.Tensor) -> float:
    """MeCo: sum over conv outputs of the smallest eigenvalue of their channel correlations.
    Train mode: batch norm on the image's own statistics (in eval mode at initialisation, a deep
    NB201 net's signal vanishes to rounding before the last cells)."""
    net = copy.deepcopy(model).float().train()
    total = [0.0]

    def hook(_m: nn.Module, _i: object, out: torch.Tensor) -> None:
        feats = out.detach()[0].flatten(1).double()  # channels x positions, first image
        corr = torch.nan_to_num(torch.corrcoef(feats), nan=0.0)  # a dead channel: no signal
        total[0] += float(torch.linalg.eigvalsh(corr)[0])

    hooks = [m.register_forward_hook(hook) for m in net.modules() if isinstance(m, nn.Conv2d)]
    try:
        with torch.no_grad():
            net(image[:1].float())
    finally:
        for h in hooks:
            h.remove()
    return total[0]


def zico(model: nn.Module, images: torch.Tensor, num_classes: int, seed: int = 0) -> float:
    """ZiCo on two halves of ``images`` with seeded random labels (train mode, as the paper)."""
    if images.shape[0] < 4:
        raise ConfigError.one("zico images", "needs a batch of at least 4 images",
                              images.shape[0], "pass a batch of e.g. 64 images")
    net = copy.deepcopy(model).float().train()
    gen = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, num_classes, (images.shape[0],), generator=gen)
    grads: dict[str, list[torch.Tensor]] = {}
    for half in torch.arange(images.shape[0]).chunk(2):
        net.zero_grad()
        nn.functional.cross_entropy(net(images[half].float()), labels[half]).backward()
        for name, p in net.named_parameters():
            if p.grad is not None and p.dim() > 1:  # weights of convs and linears
                grads.setdefault(name, []).append(p.grad.detach().flatten().clone())
    total = 0.0
    for g in grads.values():
        stack = torch.stack(g)
        std, mean = stack.std(0), stack.mean(0).abs()
        keep = std > 0
        ratio = float((mean[keep] / std[keep]).sum())
        total += math.log(ratio) if ratio > 0 else 0.0
    return total


ANALOG_SNR_SIGMA = 0.035
"""Programming noise of ``analog_snr``, relative to each output channel's largest weight (the
order of aihwkit's PCM programming noise at mid conductance)."""


def analog_snr(model: nn.Module, images: torch.Tensor, draws: int = 2, seed: int = 0,
               sigma: float = ANALOG_SNR_SIGMA) -> float:
    """Output SNR (dB) of the untrained ``model`` under PCM-like weight noise on every conv and
    linear layer, averaged over ``draws`` seeded noise draws. Train mode: batch norm on the
    batch's statistics, as AdaBS re-estimates them after programming (in eval mode at
    initialisation a deep net's output hardly depends on its input or weights)."""
    net = copy.deepcopy(model).float().train()
    layers = [m for m in net.modules() if isinstance(m, nn.Conv2d | nn.Linear)]
    clean = [m.weight.detach().clone() for m in layers]
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        ref = net(images.float())
        power, err = float(ref.pow(2).mean()), 0.0
        for _ in range(draws):
            for m, w in zip(layers, clean, strict=True):
                scale = w.abs().flatten(1).amax(1).view(-1, *[1] * (w.dim() - 1))
                noise = torch.randn(w.shape, generator=gen) * sigma * scale
                m.weight.copy_(w + noise)
            err += float((net(images.float()) - ref).pow(2).mean()) / draws
    if power <= 0 or err <= 0:
        return float("-inf") if power <= 0 else float("inf")
    return 10 * math.log10(power / err)


PROXIES: dict[str, str] = {"synflow": "log SynFlow at initialisation",
                           "naswot": "NASWOT log-determinant at initialisation"}

PRIORS: dict[str, str] = {**PROXIES, "params": "log parameter count",
                          "meco": "MeCo at initialisation (one training image)"}
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
    if name == "meco":  # judged on AnalogNAS-Bench: ranks 30-day HWA accuracy above params
        return meco(model, images)
    raise ConfigError.one("schedule.prior", f"must be one of {sorted(PRIORS)}", name,
                          "pick one of those")
