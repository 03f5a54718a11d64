"""The param/MAC counter and the downsampling rule, on models with hand-counted answers."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from search_spaces import get_space, layout
from search_spaces.stats import count_params_macs


def test_counts_linear_and_conv_exactly():
    assert count_params_macs(nn.Linear(4, 3), (4,)) == (15, 12)
    conv = nn.Conv2d(1, 2, 3, padding=1, bias=False)
    assert count_params_macs(conv, (1, 4, 4)) == (18, 2 * 9 * 4 * 4)
    dw = nn.Conv2d(4, 4, 3, padding=1, groups=4, bias=False)  # depthwise: 9 MACs per output
    assert count_params_macs(dw, (4, 5, 5)) == (36, 4 * 9 * 25)


def test_counts_attention_and_restores_train_mode():
    attn = nn.MultiheadAttention(8, 2, batch_first=True)

    class SelfAttn(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = attn

        def forward(self, x):
            return self.attn(x, x, x, need_weights=False)[0]

    model = SelfAttn().train()
    params, macs = count_params_macs(model, (5, 8))
    tokens, dim = 5, 8
    projections = 4 * tokens * dim * dim  # q, k, v and output
    scores = 2 * tokens * tokens * dim  # q @ k^T and attn @ v
    assert params == 4 * dim * dim + 4 * dim
    assert macs == projections + scores
    assert model.training


@pytest.mark.parametrize("img, strides", [
    (8, [1, 1, 1]), (9, [2, 1, 1]), (16, [2, 1, 1]), (28, [2, 2, 1]), (32, [2, 2, 1]),
    (64, [2, 2, 2]), (224, [2, 2, 2]),
])
def test_stride_plan_halves_only_above_8px(img, strides):
    assert layout.stride_plan(img, 3) == strides


def test_stem_threshold():
    assert layout.stride_plan(32, 2, stem_above=32) == [1, 2]
    assert layout.stride_plan(33, 2, stem_above=32) == [2, 2]


def _last_map(name: str, arch: str, img: int) -> int:
    model = get_space(name).build(arch, in_chans=1, num_classes=10, img_size=img).eval()
    seen = []
    pool = next(m for m in model.modules()
                if isinstance(m, nn.AdaptiveAvgPool2d | nn.AdaptiveAvgPool2d)
                or type(m).__name__ == "SelectAdaptivePool2d")
    pool.register_forward_pre_hook(lambda m, args: seen.append(args[0].shape[-1]))
    with torch.no_grad():
        model(torch.zeros(1, 1, img, img))
    return seen[0]


@pytest.mark.parametrize("name, arch", [
    ("mbconv", "mb:re-s8-k3e1c8d1-k3e1c16d1-k3e1c24d1-k3e1c48d1-k3e1c64d1"),
    ("resnet", "rn:s16-d1r1c16-d1r1c32-d1r1c64"),
    ("nb201", "|skip_connect~0|+|none~0|skip_connect~1|+|none~0|none~1|skip_connect~2|"),
])
@pytest.mark.parametrize("img, side", [(8, 8), (28, 7), (32, 8)])
def test_documented_final_map_sizes(name, arch, img, side):
    assert _last_map(name, arch, img) == side
