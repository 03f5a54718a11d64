"""Zero-cost proxies (nas.scoring.zero_cost) against a hand computation and their invariants."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from hwnas.common.errors import ConfigError
from nas.scoring.zero_cost import naswot, synflow


def test_synflow_of_a_linear_chain_matches_the_closed_form() -> None:
    # y = W2 |.| W1 x with x = 1: R = 1^T |W2| |W1| 1, and sum |theta * dR/dtheta| = 2 R
    # (each of the two layers' terms adds up to R).
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 3, bias=False), nn.Linear(3, 2, bias=False))
    w1, w2 = (net[i].weight.detach().double().abs() for i in (0, 1))
    r = float(torch.ones(2, dtype=torch.float64) @ w2 @ w1 @ torch.ones(4, dtype=torch.float64))
    assert synflow(net, (4,)) == pytest.approx(math.log(2 * r), rel=1e-9)


def test_synflow_leaves_the_model_untouched() -> None:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                        nn.Linear(4 * 6 * 6, 3))
    before = {k: v.clone() for k, v in net.state_dict().items()}
    synflow(net, (1, 8, 8))
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())
    assert all(p.grad is None for p in net.parameters())


def test_naswot_separates_distinct_images_and_rejects_one() -> None:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Flatten(), nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8), nn.ReLU())
    x = torch.randn(8, 1, 4, 4)
    distinct = naswot(net, x)
    assert naswot(net, x) == distinct  # deterministic
    assert naswot(net, x[:1].repeat(8, 1, 1, 1)) < distinct  # identical codes: singular kernel
    with pytest.raises(ConfigError, match="at least 2 images"):
        naswot(net, x[:1])
