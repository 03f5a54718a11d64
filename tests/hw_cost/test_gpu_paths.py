"""The GPU paths of hw_cost, checked where this machine can check them: the one device check and
its clear errors, TF32 set explicitly and restored, and the new record fields on CPU."""

from __future__ import annotations

import pytest
import torch
from hw_cost_helpers import FAST, tiny_cnn

from hw_cost.backends import get_backend, nvidia_smi
from hw_cost.latency import measure_latency
from hw_cost.roofline import ceilings_key, measure_ceilings
from hwnas.common.devices import (
    NO_CUDA_RULE,
    deterministic_state,
    device_problem,
    is_cuda,
    require_device,
    set_deterministic,
    set_tf32,
    tf32_block,
    tf32_state,
)
from hwnas.common.errors import ConfigError

no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")


@pytest.mark.parametrize("name", ["cpu", "cpu:0"])
def test_the_cpu_is_always_usable(name):
    assert device_problem(name) is None and require_device(name) == name


@pytest.mark.parametrize(("name", "rule"), [
    ("tpu", "must be one of ['cpu', 'cuda']"),
    ("cuda:x", "device index must be a non-negative integer"),
    ("cpu:3", "the CPU has no device index"),
])
def test_bad_names_are_clear_errors(name, rule):
    with pytest.raises(ConfigError) as err:
        require_device(name, where="latency.device")
    text = str(err.value)
    assert text.startswith("latency.device: ") and rule in text and repr(name) in text
    assert "Fix:" in text


@no_cuda
@pytest.mark.parametrize("name", ["cuda", "cuda:1"])
def test_cuda_on_a_cpu_machine_names_rule_value_and_fix(name):
    with pytest.raises(ConfigError) as err:
        require_device(name, where="--device")
    assert NO_CUDA_RULE in str(err.value) and "Fix: use cpu here" in str(err.value)
    assert is_cuda(name) and not is_cuda("cpu")


@no_cuda
def test_measuring_on_cuda_fails_before_any_work(monkeypatch):
    import hw_cost.latency as latency

    def never(*args, **kwargs):  # building the timed copy is the first piece of work
        raise AssertionError("work started before the device check")

    monkeypatch.setattr(latency, "prepare", never)
    with pytest.raises(ConfigError, match=NO_CUDA_RULE):
        measure_latency(tiny_cnn(), (1, 8, 8), device="cuda")
    with pytest.raises(ConfigError, match=NO_CUDA_RULE):
        measure_ceilings(device="cuda")


@pytest.mark.parametrize("enabled", [True, False])
def test_tf32_is_set_explicitly_and_restored(enabled):
    before = tf32_state()
    with tf32_block(enabled) as state:
        assert state == {"matmul": enabled, "cudnn": enabled}
        assert torch.backends.cuda.matmul.allow_tf32 is enabled
        assert torch.backends.cudnn.allow_tf32 is enabled
    assert tf32_state() == before
    old = set_tf32(not before["matmul"])
    assert old == before
    set_tf32(before["matmul"])
    torch.backends.cudnn.allow_tf32 = before["cudnn"]


def test_deterministic_kernels_are_set_and_recorded(monkeypatch):
    """The truth's GPU workers call this before any CUDA work: every switch on, cuBLAS's
    workspace set, and ops without a deterministic kernel warn rather than stop a run."""
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    before = (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark,
              torch.are_deterministic_algorithms_enabled(),
              torch.is_deterministic_algorithms_warn_only_enabled())
    try:
        state = set_deterministic()
        assert state == deterministic_state() == {
            "cudnn_deterministic": True, "cudnn_benchmark": False, "algorithms": True,
            "warn_only": True, "cublas_workspace": ":4096:8"}
    finally:
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = before[:2]
        torch.use_deterministic_algorithms(before[2], warn_only=before[3])


def test_nvidia_smi_without_the_tool_says_unknown(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    facts = nvidia_smi()
    assert set(facts) >= {"driver_version", "clocks.sm", "clocks.max.sm"}
    assert set(facts.values()) == {"unknown"}


def test_a_cpu_record_has_no_gpu_fields():
    r = measure_latency(tiny_cnn(), (1, 8, 8), threads=1, rule=FAST)
    d = r.to_dict()
    assert d["tf32"] is None and d["peak_memory_bytes"] is None and d["gpu"] == {}


def test_cpu_backend_precision_sets_nothing():
    before = tf32_state()
    with get_backend("cpu").precision("cpu", True) as record:
        assert record == {"tf32": None} and tf32_state() == before


def test_tf32_changes_only_cuda_ceiling_keys():
    cpu, cuda = {"backend": "cpu"}, {"backend": "cuda"}
    assert ceilings_key(cpu, "fp32", tf32=True) == ceilings_key(cpu, "fp32")
    assert ceilings_key(cuda, "fp32", tf32=True) != ceilings_key(cuda, "fp32")


def test_small_ceilings_for_dry_runs():
    c = measure_ceilings(threads=1, matmul_n=(64,), copy_bytes=2**20, warmup_s=0.0,
                         timed_s=0.01, repeats=2)
    assert c.matmul_n == 64 and c.copy_bytes == 2**20 and c.tf32 is None
    assert c.peak_flops > 0 and c.peak_bytes_per_s > 0


@pytest.mark.gpu
def test_cuda_record_carries_precision_memory_and_clocks():
    r = measure_latency(tiny_cnn(), (1, 8, 8), device="cuda", rule=FAST, tf32=False)
    assert r.tf32 is False and r.peak_memory_bytes > 0
    assert r.gpu["device"] and "clocks_mhz" in r.gpu and r.gpu["tf32"]["cudnn"] is False


def _fake_gpu(monkeypatch):
    """A GPU's properties and nvidia-smi answers, so the CUDA record code runs on a CPU."""
    from types import SimpleNamespace

    import hw_cost.backends as backends

    props = SimpleNamespace(name="Fake H100", major=9, minor=0, total_memory=80 * 2**30,
                            L2_cache_size=50 * 2**20, multi_processor_count=132)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda dev: props)
    smi = {"driver_version": "580.1", "clocks.sm": "1980", "clocks.mem": "2619",
           "clocks.max.sm": "1980", "clocks.max.mem": "2619", "power.limit": "700"}
    monkeypatch.setattr(backends, "nvidia_smi", lambda index=0: smi)
    return backends


def test_gpu_facts_name_clocks_driver_and_tf32(monkeypatch):
    backends = _fake_gpu(monkeypatch)
    with tf32_block(False):
        facts = backends.gpu_facts("cuda:0")
    assert facts["device"] == "Fake H100" and facts["driver"] == "580.1"
    assert facts["clocks_mhz"] == {"clocks.sm": "1980", "clocks.mem": "2619",
                                   "clocks.max.sm": "1980", "clocks.max.mem": "2619"}
    assert facts["l2_bytes"] == 50 * 2**20 and facts["tf32"] == {"matmul": False, "cudnn": False}


@pytest.mark.parametrize("enabled", [True, False])
def test_cuda_precision_sets_tf32_for_the_block_and_records_it(monkeypatch, enabled):
    backends = _fake_gpu(monkeypatch)
    before = tf32_state()
    with backends.CudaBackend().precision("cuda", enabled) as record:
        assert record["tf32"] is enabled and record["gpu"]["tf32"]["cudnn"] is enabled
        assert torch.backends.cudnn.allow_tf32 is enabled
    assert tf32_state() == before
