"""analog.evaluate on CUDA: a model on the GPU scored on images held on the CPU, as a study holds
them. Skipped without a CUDA device."""

from __future__ import annotations

import pytest
import torch

import analog
from search_spaces import get_space

pytestmark = pytest.mark.gpu  # skipped without CUDA (tests/conftest.py)


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return get_space("resnet").build("rn:s16-d1r1c16", in_chans=1, num_classes=10,
                                     img_size=28).eval()


def _data() -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return torch.randn(64, 1, 28, 28, generator=gen), torch.randint(0, 10, (64,), generator=gen)


def test_noise_free_tiles_on_cuda_match_the_cpu():
    x, y = _data()
    cpu = analog.evaluate(_model(), x, y, "pcm_ideal", calib=x[:16])
    model = _model().cuda()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    gpu = analog.evaluate(model, x, y, "pcm_ideal", calib=x[:16], device="cuda")
    assert gpu.path == cpu.path
    assert abs(gpu.points[0].acc_mean - cpu.points[0].acc_mean) <= 2 / len(x)  # near-ties
    assert gpu.coverage["mac_fraction"] == pytest.approx(cpu.coverage["mac_fraction"])
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)  # the caller's model untouched


def test_pcm_with_adabs_on_cuda_runs_every_repeat_and_time():
    x, y = _data()
    res = analog.evaluate(_model().cuda(), x, y, "pcm", times=("1h", "1d"), repeats=2, adabs=32,
                          adabs_images=x[:32], calib=x[:16], device="cuda")
    assert res.repeats == 2 and res.adabs == 32
    assert all(len(p.accs) == 2 and 0 <= p.acc_mean <= 1 for p in res.points)
