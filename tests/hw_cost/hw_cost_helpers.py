"""Shared test helpers (a module of its own: ``conftest`` names clash across test folders)."""

from __future__ import annotations

from torch import nn

from hw_cost.latency import StopRule

# Enough calls for a median, short enough that the whole package's tests stay within budget.
FAST = StopRule(window=5, rel_tol=0.5, min_repeats=5, max_seconds=0.2,
                warmup_seconds=0.0, warmup_calls=1)


def tiny_cnn(in_chans: int = 1, classes: int = 10) -> nn.Module:
    return nn.Sequential(nn.Conv2d(in_chans, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.Conv2d(8, 8, 3, padding=1, groups=8), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(8, classes))
