"""Random streams: deterministic, independent of each other, and safe for torch and numpy."""

from __future__ import annotations

import pytest
import torch

from hwnas.common.seeds import STREAMS, TrialSeeds, rng_devices, stream_seed


def test_streams_are_deterministic_and_distinct():
    seeds = {s: stream_seed(0, s) for s in STREAMS}
    assert seeds == {s: stream_seed(0, s) for s in STREAMS}
    assert len(set(seeds.values())) == len(STREAMS)
    # another study seed moves every stream; an index tells draws of one stream apart
    assert all(stream_seed(1, s) != v for s, v in seeds.items())
    assert len({stream_seed(0, "program", r, i) for r in range(20) for i in range(3)}) == 60


@pytest.mark.parametrize("seed", [0, 1, -1, 2**70])
def test_seeds_fit_torch(seed):
    value = stream_seed(seed, "init")
    assert 0 <= value < 2**63
    torch.manual_seed(value)  # accepted


def test_trial_seeds_record_every_stream():
    seeds = TrialSeeds(3)
    record = seeds.as_dict()
    assert record["seed"] == 3 and set(STREAMS) <= set(record)
    assert record["init"] == seeds.init == stream_seed(3, "init")
    with pytest.raises(AttributeError, match="no random stream 'nope'"):
        _ = seeds.nope


def test_rng_devices_name_the_cuda_generator_to_restore():
    assert rng_devices("cpu") == [] and rng_devices(torch.device("cpu")) == []
    assert rng_devices("cuda:1") == [1]  # parsed only: no CUDA device is touched


@pytest.mark.gpu
def test_rng_devices_of_plain_cuda_is_the_current_device():
    assert rng_devices("cuda") == [torch.cuda.current_device()]
