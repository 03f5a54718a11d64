"""On a machine without CUDA, every way of asking for it is one clear error (rule, value, fix)
before any work: the command lines that take ``--device`` and a study's ``latency.device`` /
``train.device``. Skipped where CUDA exists."""

from __future__ import annotations

import pytest
import torch

from hwnas.common.errors import ConfigError
from nas.cli import main

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")


def _no_data(*args, **kwargs):
    raise AssertionError("data loaded before the device check")


@pytest.fixture
def no_data(monkeypatch):
    import hwnas.train.data as data

    monkeypatch.setattr(data, "load_data", _no_data)


@pytest.mark.parametrize("argv", [
    ["train", "resnet", "rn:s16-d1r1c16", "--device", "cuda", "--steps", "1"],
    ["supernet", "train", "resnet", "--device", "cuda", "--steps", "1"],
    ["cost", "resnet", "rn:s16-d1r1c16", "--device", "cuda:0"],
    ["analog-eval", "--space", "resnet", "--arch", "rn:s16-d1r1c16", "--device", "cuda"],
])
def test_clis_refuse_cuda_before_any_work(capsys, no_data, argv):
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and "cuda" in err and "Fix:" in err and "got 'cuda" in err


def test_the_gpu_study_names_both_devices():
    from nas.study.files import load_study

    with pytest.raises(ConfigError) as err:
        load_study("quickstart_gpu")
    where = {p.where for p in err.value.problems}
    assert {"latency.device", "train.device"} <= where
    assert all("CUDA" in p.rule and p.value == "cuda" for p in err.value.problems
               if p.where.endswith(".device"))


def test_latency_device_cuda_alone_is_refused():
    from nas.study.files import load_study

    with pytest.raises(ConfigError, match="latency.device: CUDA asked"):
        load_study("quickstart", {"latency.device": "cuda"})
