"""The device models whose aihwkit code calls numpy on tensors (and so fails on CUDA) run through
torch alone here, with aihwkit's values and random draws, checked on CPU.

A tensor subclass that refuses to become a numpy array stands in for a CUDA tensor: aihwkit's
own methods fail on it, ours must not."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import analog
from analog.devices import DEVICE_AGNOSTIC, torch_interp

DAY = 86400.0


class NoNumpy(torch.Tensor):
    """A tensor that, like a CUDA tensor, cannot be turned into a numpy array."""

    def numpy(self, *args, **kwargs):
        raise TypeError("can't convert this tensor to numpy (as on CUDA)")

    def __array__(self, *args, **kwargs):
        raise TypeError("can't convert this tensor to numpy (as on CUDA)")


def _noise(name: str):
    return analog.get_hw(name).rpu_config().noise_model


def _aihwkit_method(noise, method: str):
    """aihwkit's own method (the parent class's), bound to ``noise``."""
    return getattr(type(noise).__mro__[1], method).__get__(noise)


def _conductances(lo: float, hi: float) -> torch.Tensor:
    gen = torch.Generator().manual_seed(1)
    return lo + (hi - lo) * torch.rand(64, 48, generator=gen)


@pytest.mark.parametrize(("name", "cls"), [("pcm_custom_drift", "CustomDriftPCMLikeNoiseModel"),
                                           ("reram_cmo", "ReRamCMONoiseModel")])
def test_entries_use_the_same_named_subclass(name, cls):
    import aihwkit.inference as inference

    noise = _noise(name)
    assert type(noise).__name__ == cls and cls in DEVICE_AGNOSTIC
    assert isinstance(noise, getattr(inference, cls)) and type(noise) is not getattr(inference, cls)


def test_torch_interp_agrees_with_numpy():
    xp, fp = [0.0, 1.0, 2.5, 5.0, 25.0], [0.1, 0.08, 0.07, 0.05, 0.049]
    x = torch.cat([torch.linspace(-1, 26, 200), torch.tensor(xp)])
    np.testing.assert_allclose(torch_interp(x, xp, fp).numpy(), np.interp(x.numpy(), xp, fp),
                               rtol=1e-6)


def test_custom_drift_nu_matches_aihwkit_on_cpu():
    noise = _noise("pcm_custom_drift")
    g = _conductances(-1.0, 27.0)  # beyond the table on both sides: clipped as aihwkit does
    torch.manual_seed(0)
    ref = _aihwkit_method(noise, "generate_drift_coefficients")(g.clone())
    torch.manual_seed(0)
    ours = noise.generate_drift_coefficients(g.clone())
    assert ours.dtype == ref.dtype and torch.allclose(ours, ref, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("t", [0.0, 1.0, DAY, 365 * DAY])
def test_cmo_drift_matches_aihwkit_on_cpu(t):
    noise = _noise("reram_cmo")
    g = _conductances(noise.g_min, noise.g_max)
    torch.manual_seed(0)
    ref = _aihwkit_method(noise, "apply_drift_noise_to_conductance")(g.clone(), g, t)
    torch.manual_seed(0)
    ours = noise.apply_drift_noise_to_conductance(g.clone(), g, t)
    assert torch.allclose(torch.as_tensor(ours), torch.as_tensor(ref), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("name", "method", "args"), [
    ("pcm_custom_drift", "generate_drift_coefficients", ()),
    ("reram_cmo", "apply_drift_noise_to_conductance", (DAY,)),
])
def test_no_numpy_on_tensors(name, method, args):
    noise = _noise(name)
    lo = getattr(noise, "g_min", 0.0)
    g = _conductances(lo, noise.g_max).as_subclass(NoNumpy)
    extra = (g, *args) if args else ()
    with pytest.raises(TypeError, match="numpy"):  # aihwkit's own: the CUDA failure, on CPU
        _aihwkit_method(noise, method)(g.clone(), *extra)
    out = getattr(noise, method)(g.clone(), *extra)
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("name", ["pcm_custom_drift", "reram_cmo"])
def test_programming_and_drift_of_weights_never_touch_numpy(name):
    noise = _noise(name)
    w = (torch.randn(16, 24, generator=torch.Generator().manual_seed(2)) * 0.1)
    programmed, nu = noise.apply_programming_noise(w.as_subclass(NoNumpy))
    drifted = noise.apply_drift_noise(programmed, nu, DAY)
    assert drifted.shape == w.shape and torch.isfinite(drifted).all()


def test_subclasses_pickle_by_name():
    import pickle

    noise = _noise("reram_cmo")
    again = pickle.loads(pickle.dumps(noise))
    assert type(again) is type(noise)
