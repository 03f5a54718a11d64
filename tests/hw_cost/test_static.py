"""Static costs: FLOP counts against hand counts and Torch-Pruning, memory, model bytes.

Conventions. ``static_costs`` counts with ``FlopCounterMode``: matrix products and convolutions
only, 2 FLOPs per multiply-accumulate, so ``macs == flops / 2``. Torch-Pruning's
``count_ops_and_params`` returns MACs for conv/linear layers plus one op per element for bias
adds, ReLU/GELU, BatchNorm/LayerNorm (two when affine; exact ``nn`` types only, so timm's
``BatchNormAct2d`` adds nothing) and pooling. For a timm ``Attention`` it counts the qkv and
output projections, QK^T and AV as MACs, plus the query scaling, the biases and one op per
softmax element. So Torch-Pruning's figure is never below our MACs and exceeds it by the
element-wise work only: under 1.5% for these models.
"""

from __future__ import annotations

import pytest
import timm
import torch
import torch_pruning as tp
from torch import nn

from hw_cost.static import count_flops, static_costs

CUDA = torch.cuda.is_available()


@pytest.mark.parametrize("name, kwargs, size", [
    ("mobilenetv3_small_050", {}, 64),
    ("efficientnet_b0", {}, 64),
    ("vit_tiny_patch16_224", {"img_size": 64}, 64),
])
def test_flops_agree_with_torch_pruning(name, kwargs, size):
    model = timm.create_model(name, pretrained=False, num_classes=10, **kwargs).eval()
    ours = static_costs(model, (3, size, size))
    ops, params = tp.utils.count_ops_and_params(model, torch.randn(1, 3, size, size))
    assert ours["params"] == params
    assert ours["macs"] == ours["flops"] // 2
    assert ours["macs"] <= ops <= 1.015 * ours["macs"], (ours["macs"], ops)


def test_attention_is_counted_under_the_math_backend():
    # The fused CPU attention kernel reports 0 FLOPs; static_costs must see the two bmm's.
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=32,
                              num_classes=10).eval()
    by_op = static_costs(model, (3, 32, 32))["flops_by_op"]
    tokens, dim, depth = (32 // 16) ** 2 + 1, 192, 12
    assert by_op["bmm"] == depth * 2 * (2 * tokens * tokens * dim)  # QK^T and AV


def test_hand_counted_conv_and_linear():
    model = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.ReLU(), nn.Flatten(),
                          nn.Linear(4 * 5 * 5, 3))
    costs = static_costs(model, (2, 5, 5), batch_size=2)
    conv = 5 * 5 * 4 * (2 * 3 * 3)
    assert costs["macs"] == 2 * (conv + 100 * 3)  # whole batch
    assert costs["params"] == 4 * 2 * 9 + 4 + 100 * 3 + 3
    assert costs["model_bytes"] == 4 * costs["params"]


def test_model_bytes_follow_the_dtype(cnn):
    fp32 = static_costs(cnn, (1, 8, 8))["model_bytes"]
    bf16 = static_costs(cnn, (1, 8, 8), dtype="bf16")["model_bytes"]
    ints = 8  # BatchNorm's num_batches_tracked stays int64
    assert bf16 - ints == (fp32 - ints) // 2


def test_peak_activation_tracks_liveness_not_the_sum():
    width, depth = 1000, 10
    model = nn.Sequential(*[nn.Linear(width, width) for _ in range(depth)])
    costs = static_costs(model, (width,))
    one = 4 * width
    assert costs["activation_bytes"] == (depth + 1) * one  # input and every output, once
    # Freed outputs leave the count: at most input + previous output + current output.
    assert costs["peak_activation_bytes"] == 3 * one
    assert costs["peak_activation_method"] == "estimated_from_hooks"
    assert costs["leaf_calls"] == depth


def test_inplace_ops_add_no_bytes():
    model = nn.Sequential(nn.Linear(100, 100), nn.ReLU(inplace=True))
    assert static_costs(model, (100,))["activation_bytes"] == 2 * 4 * 100


def test_count_flops_leaves_no_mode_behind(cnn):
    before = count_flops(cnn, torch.randn(1, 1, 8, 8))[0]
    assert before > 0 and count_flops(cnn, torch.randn(1, 1, 8, 8))[0] == before


@pytest.mark.gpu
def test_cuda_peak_memory_is_measured(cnn):
    costs = static_costs(cnn, (1, 64, 64), device="cuda")
    assert costs["peak_activation_method"] == "measured" and costs["peak_activation_bytes"] > 0
