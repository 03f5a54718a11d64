"""The label-free proxies (MeCo, ZiCo with random labels, analog_snr): determinism under a seed,
the invariances each rests on, agreement with a brute-force computation, bad input."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from hwnas.common.errors import ConfigError
from nas.scoring.zero_cost import analog_snr, meco, zico
from search_spaces import get_space

ARCH = "|nor_conv_3x3~0|+|skip_connect~0|nor_conv_1x1~1|+|avg_pool_3x3~0|nor_conv_3x3~1|none~2|"


def _net(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return get_space("nb201").build(ARCH, in_chans=3, num_classes=10, img_size=32)


def _x(n: int = 16) -> torch.Tensor:
    return torch.randn(n, 3, 32, 32, generator=torch.Generator().manual_seed(1))


def test_each_proxy_is_deterministic_and_leaves_the_model_alone() -> None:
    net, x = _net(), _x()
    before = {k: v.clone() for k, v in net.state_dict().items()}
    for score in (lambda: meco(net, x), lambda: zico(net, x, 10), lambda: analog_snr(net, x)):
        a, b = score(), score()
        assert a == b and math.isfinite(a)
    assert all(torch.equal(v, net.state_dict()[k]) for k, v in before.items())


def test_meco_is_the_brute_force_sum_of_smallest_correlation_eigenvalues() -> None:
    net, x = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Conv2d(4, 5, 1)), _x(1)
    feats, want = x, 0.0
    for layer in net:
        feats = layer(feats)
        if isinstance(layer, nn.Conv2d):
            f = feats.detach()[0].reshape(feats.shape[1], -1).double()
            f = (f - f.mean(1, keepdim=True)) / f.std(1, keepdim=True)
            corr = f @ f.T / (f.shape[1] - 1)
            want += float(torch.linalg.eigvalsh(corr).min())
    assert meco(net, x) == pytest.approx(want, rel=1e-6)
    assert meco(net, 3.0 * x) == pytest.approx(meco(net, x), rel=1e-5)  # correlations: no scale


def test_analog_snr_gains_6_db_when_the_noise_halves() -> None:
    net, x = _net(), _x()
    full, half = analog_snr(net, x, sigma=1e-3), analog_snr(net, x, sigma=5e-4)
    assert half - full == pytest.approx(20 * math.log10(2), abs=0.3)  # small noise: linear
    assert analog_snr(net, x, seed=1) != analog_snr(net, x, seed=2)


def test_zico_needs_two_halves_of_a_batch() -> None:
    with pytest.raises(ConfigError) as err:
        zico(_net(), _x(2), 10)
    assert "at least 4" in str(err.value)
