"""Loading any model for the analog report: each spec form, each weights-file style, bad input."""

from __future__ import annotations

import random

import pytest
import torch
from torch import nn

from analog.model_source import build_model, is_hwnas_checkpoint, load_weights, read_state_dict
from hwnas.common.errors import ConfigError

SHAPE = {"in_chans": 1, "num_classes": 10, "img_size": 16}


def tiny(in_chans: int, num_classes: int) -> nn.Module:
    """A factory that takes only two of the three sizes."""
    return nn.Sequential(nn.Conv2d(in_chans, 4, 3), nn.Flatten(), nn.LazyLinear(num_classes))


def not_a_model(num_classes: int) -> int:
    return num_classes


def _same(a: nn.Module, b: nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def _fresh(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return build_model("timm:resnet10t", **SHAPE)


@pytest.mark.parametrize("style", ["bare", "state_dict", "model", "ddp", "compiled",
                                   "safetensors"])
def test_weights_round_trip(tmp_path, style):
    src, dst = _fresh(0), _fresh(1)
    assert not _same(src, dst)
    sd = src.state_dict()
    path = tmp_path / ("w.safetensors" if style == "safetensors" else "w.pt")
    if style == "safetensors":
        from safetensors.torch import save_file

        save_file({k: v.contiguous() for k, v in sd.items()}, str(path))
    else:
        wrapped = {"bare": sd, "state_dict": {"state_dict": sd, "epoch": 3},
                   "model": {"model": sd, "optimizer": {}},
                   "ddp": {f"module.{k}": v for k, v in sd.items()},
                   "compiled": {f"_orig_mod.{k}": v for k, v in sd.items()}}[style]
        torch.save(wrapped, path)
    assert _same(load_weights(dst, path), src)


def test_torchvision_keys_load_into_timm_resnet(tmp_path):
    """torchvision's resnet18 file loads into timm's resnet18 (same key names), same outputs."""
    import torchvision

    tv = torchvision.models.resnet18(weights=None, num_classes=10).eval()
    torch.save(tv.state_dict(), tmp_path / "tv.pth")
    tm = load_weights(build_model("timm:resnet18", in_chans=3, num_classes=10, img_size=32),
                      tmp_path / "tv.pth")
    x = torch.randn(2, 3, 32, 32)
    assert torch.allclose(tv(x), tm(x), atol=1e-5)


def test_spec_forms_build():
    vit = build_model("timm:vit_tiny_patch16_224", in_chans=1, num_classes=10, img_size=32)
    assert vit(torch.randn(1, 1, 32, 32)).shape == (1, 10)
    assert isinstance(build_model("torchvision:resnet18", in_chans=3, num_classes=10,
                                  img_size=32), nn.Module)
    fac = build_model(f"{__name__}:tiny", **SHAPE)
    assert fac(torch.randn(1, 1, 16, 16)).shape == (1, 10)
    space = build_model("resnet:" + _resnet_arch(), **SHAPE)
    assert space(torch.randn(1, 1, 16, 16)).shape == (1, 10)


def _resnet_arch() -> str:
    from search_spaces import get_space

    return get_space("resnet").random_arch(random.Random(0))


@pytest.mark.parametrize(("spec", "words"), [
    ("resnet18", "must be one of"), ("timm:not_a_model", "timm model"),
    ("torchvision:nope", "torchvision model"), ("nomodule_xyz:f", "importable"),
    (f"{__name__}:not_a_model", "nn.Module")])
def test_bad_specs(spec, words):
    with pytest.raises(ConfigError) as err:
        build_model(spec, **SHAPE)
    assert words in str(err.value)


def test_torchvision_refuses_one_channel():
    with pytest.raises(ConfigError, match="timm:resnet18"):
        build_model("torchvision:resnet18", **SHAPE)


def test_bad_weights(tmp_path):
    with pytest.raises(ConfigError, match="nothing downloads"):
        read_state_dict(tmp_path / "missing.pt")
    torch.save({"epoch": 3}, tmp_path / "empty.pt")
    with pytest.raises(ConfigError, match="state_dict"):
        read_state_dict(tmp_path / "empty.pt")
    other = build_model("timm:resnet18", **SHAPE)
    torch.save(other.state_dict(), tmp_path / "r18.pt")
    with pytest.raises(ConfigError) as err:
        load_weights(_fresh(0), tmp_path / "r18.pt")
    assert "unexpected" in str(err.value) and "--model" in str(err.value)
    assert not is_hwnas_checkpoint(tmp_path / "r18.pt")
