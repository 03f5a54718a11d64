"""Every registered supernet: extraction computes the active path, has the space's structure,
shares weights with the bank, and rejects archs it does not cover."""

from __future__ import annotations

import random

import pytest
import torch

from hwnas.common.errors import ConfigError
from search_spaces import get_space, list_spaces
from search_spaces.supernet import build_supernet, list_supernets, recalibrate_bn

SHAPE = {"in_chans": 1, "num_classes": 10, "img_size": 28}


@pytest.fixture(scope="module", params=list_supernets())
def net(request):
    torch.manual_seed(0)
    sn = build_supernet(request.param, **SHAPE)
    with torch.no_grad():  # non-trivial BN statistics and weights, so a wrong slice shows
        for name, buf in sn.named_buffers():
            if "running" in name:
                buf.uniform_(0.5, 1.5)
        for p in sn.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    return sn.eval()


def _archs(net, n: int = 4) -> list[str]:
    rng = random.Random(1)
    return [net.largest(), net.smallest(), *(net.random_arch(rng) for _ in range(n))]


def test_supernets_cover_the_spaces():
    assert set(list_supernets()) <= set(list_spaces())
    assert {"resnet", "mbconv", "vit"} <= set(list_supernets())


def test_extract_computes_the_active_path(net):
    x = torch.randn(3, 1, 28, 28)
    for arch in _archs(net):
        net.activate(arch)
        with torch.no_grad():
            torch.testing.assert_close(net.extract(arch).eval()(x), net(x), rtol=1e-5, atol=1e-5)


def test_extract_has_the_structure_of_build(net):
    space = get_space(net.space_name)
    for arch in _archs(net):
        sub, ref = net.extract(arch), space.build(arch, **SHAPE)
        assert [(k, v.shape) for k, v in sub.state_dict().items()] == \
               [(k, v.shape) for k, v in ref.state_dict().items()]
        assert type(sub) is type(ref)
        assert str(sub) == str(ref)  # same module tree, strides and paddings included


def test_sub_networks_share_the_bank(net):
    """A step on the smallest sub-network moves the largest one's output: weights are shared,
    and the gradient reaches only the bank entries the small one uses."""
    small = net.smallest()
    net.train().activate(small)
    net.zero_grad()
    net(torch.randn(4, 1, 28, 28)).square().mean().backward()
    touched = [p for p in net.params.values() if p.grad is not None and p.grad.abs().sum() > 0]
    untouched = [p for p in net.params.values() if p.grad is None or p.grad.abs().sum() == 0]
    assert touched and untouched
    net.eval()
    before = net.extract(net.largest()).state_dict()
    with torch.no_grad():
        for p in touched:
            p.sub_(0.1 * p.grad)
    after = net.extract(net.largest()).state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)
    with torch.no_grad():  # undo for the other tests of the module
        for p in touched:
            p.add_(0.1 * p.grad)


def test_extract_is_an_independent_copy(net):
    arch = net.smallest()
    sub = net.extract(arch)
    with torch.no_grad():
        for p in sub.parameters():
            p.zero_()
    assert any(t.abs().sum() > 0 for t in net.extract(arch).state_dict().values())


def test_recalibrate_bn_is_deterministic_and_leaves_eval_mode(net):
    arch = net.random_arch(random.Random(3))
    x = torch.randn(16, 1, 28, 28)
    a, b = net.extract(arch), net.extract(arch)
    recalibrate_bn(a, x, batch_size=8)
    recalibrate_bn(b, x, batch_size=8)
    assert not a.training
    for (k, va), vb in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        torch.testing.assert_close(va, vb, msg=k)


def test_other_space_arch_is_a_clear_error(net):
    other = next(s for s in list_supernets() if s != net.space_name)
    with pytest.raises(ConfigError, match=f"{net.space_name} supernet.*covers only"):
        net.activate(get_space(other).example)
    with pytest.raises(ConfigError, match="covers only"):
        net.extract(net.largest() + "x")


def test_mbconv_kernels_go_through_the_transform():
    net = build_supernet("mbconv", **SHAPE).eval()
    arch = net.smallest()  # every kernel 3x3: two transforms from the 7x7 bank
    key = "blocks.1.0.conv_dw.weight"
    plain = net.extract(arch).state_dict()[key]
    with torch.no_grad():
        for tf in net.kernel_tf.values():
            tf.mul_(2.0)
    derived = net.extract(arch).state_dict()[key]
    torch.testing.assert_close(derived, 4.0 * plain)
    centre = net.bank(key)[:plain.shape[0], :, 2:5, 2:5]
    torch.testing.assert_close(plain, centre)  # identity transforms: the OFA centre crop


def test_vit_qkv_is_entangled_per_part():
    from search_spaces.vit import HEAD_DIM

    """q, k and v of a narrow sub-network are each the leading rows of the wide q, k and v."""
    net = build_supernet("vit", **SHAPE)
    bank = net.bank("blocks.0.attn.qkv.weight")
    wide = bank.shape[0] // 3
    sub = net.extract("vit:p4-e64-h2m1-h4m2").state_dict()["blocks.0.attn.qkv.weight"]
    rows = 2 * HEAD_DIM  # fixed head width: two heads keep the leading 32 rows of q, k and v
    assert sub.shape == (3 * rows, 64)
    for part in range(3):
        torch.testing.assert_close(sub[part * rows:(part + 1) * rows],
                                   bank[part * wide:][:rows, :64])
