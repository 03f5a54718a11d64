"""Device models beyond PCM: aihwkit's other inference noise models, each on the ``pcm`` periphery.

Every entry keeps ``pcm``'s periphery (aihwkit ``InferenceRPUConfig`` defaults with column-wise
weight scaling, omega 1, and global drift compensation) and swaps the statistical device model,
so a comparison between entries is a comparison between devices:

* ``reram_cmo``: ``ReRamCMONoiseModel`` (aihwkit 1.2), filamentary conductive-metal-oxide /
  HfOx ReRAM from IBM Research Zurich (Falcone et al., in review, as cited by aihwkit). One
  device per weight (``SingleDeviceConductanceConverter``, g_min 9 uS, g_max 88.2 uS).
  Programming noise linear in the target conductance; aihwkit's default ``acceptance_range``
  (2e-2) is not a key of its coefficients {0.2, 2}, so aihwkit uses the 0.2 % program-and-verify
  coefficients (sigma = 0.00081 + 0.00107 * g uS). Conductance relaxation: mean shift
  -0.089 uS * ln(t), spread 0.042 * ln(t) + 0.41 uS, plus accumulated 1/f read noise
  (K = 0.0277, t_read 1 us), clipped to [g_min, g_max].
* ``reram_wan2022``: ``ReRamWan2022NoiseModel``, HfOx ReRAM of the NeuRRAM chip (Wan et al.,
  Nature 608, 504-512, 2022), g_max 40 uS (the reference its polynomial fits use), a
  conductance pair per weight. Deviations from the target are 4th-order polynomial fits at
  1 s, 1 d and 2 d only: the model is defined at those drift times and nowhere else.
* ``pcm_hermes``: ``HermesNoiseModel``, the PCM devices of the IBM HERMES chip (Le Gallo et al.,
  Nat. Electron. 6, 680-693, 2023; Khaddam-Aljameh et al., JSSC 2022), two devices per
  conductance of the differential pair (aihwkit's "2 devices per weight": four per weight)
  (multi-step programming, Vasilopoulos et al., TED 2023), g_max 20.7 uS, t_0 300 s.
* ``pcm_custom_drift``: ``CustomDriftPCMLikeNoiseModel``, PCM programming and read noise with a
  user-given drift table (mean and std of the drift exponent nu at listed conductances, linearly
  interpolated; N. Li et al., Adv. Electron. Mater. 2023, as cited by aihwkit). The registered
  table samples ``PCMLikeNoiseModel``'s own nu(g) law (Nandakumar et al., ICECS 2019) at
  0-25 uS, so it matches ``pcm`` up to interpolation; ``custom_drift_config`` builds others.

aihwkit's ReRAM docstrings advise about 1 % short-term read noise through ``forward.w_noise``
(``ADDITIVE_CONSTANT``), which both ReRAM entries set: ``reram_wan2022`` has no read noise of
its own, and ``reram_cmo`` adds its 1/f term only after programming.

Two aihwkit 1.2 models call numpy on conductance tensors (``numpy.interp`` on ``.numpy()`` in
``CustomDriftPCMLikeNoiseModel.generate_drift_coefficients``, ``numpy.log10`` in
``ReRamCMONoiseModel.apply_drift_noise_to_conductance``), which fails on CUDA tensors. The
entries use same-named subclasses (``DEVICE_AGNOSTIC``) whose overrides compute the same
values with torch on the tensor's device and draw the same random numbers in the same order.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from analog.aimc import AnalogHW, columnwise_omega1
from analog.hw import HW

if TYPE_CHECKING:
    from torch import Tensor

DAY = 86400.0
WAN2022_TIMES = (1.0, DAY, 2 * DAY)
READ_NOISE = 0.01
"""Short-term read noise (``forward.w_noise``) aihwkit's ReRAM docstrings advise: about 1 %."""


def _on_pcm_periphery(noise_model: Any, *, read_noise: float = 0.0):
    from aihwkit.inference.compensation.drift import GlobalDriftCompensation
    from aihwkit.simulator.configs import InferenceRPUConfig
    from aihwkit.simulator.parameters.enums import WeightNoiseType

    rpu = InferenceRPUConfig()
    rpu.noise_model = noise_model
    rpu.drift_compensation = GlobalDriftCompensation()
    if read_noise > 0:
        rpu.forward.w_noise = read_noise
        rpu.forward.w_noise_type = WeightNoiseType.ADDITIVE_CONSTANT
    return columnwise_omega1(rpu)


def _noise_class(name: str):
    """An aihwkit noise-model class by name (AttributeError where this aihwkit lacks it); the
    device-agnostic subclass where aihwkit's calls numpy on tensors."""
    if name in DEVICE_AGNOSTIC:
        return _agnostic(name)
    import aihwkit.inference as inference

    return getattr(inference, name)


def torch_interp(x: Tensor, xp: Sequence[float], fp: Sequence[float]) -> Tensor:
    """``numpy.interp(x, xp, fp)`` on ``x``'s device: piecewise linear through (xp, fp), ``xp``
    ascending, constant beyond its ends. Computed in float64, as numpy does, then cast to
    ``x``'s dtype."""
    import torch

    xs = torch.as_tensor(xp, dtype=torch.float64, device=x.device)
    ys = torch.as_tensor(fp, dtype=torch.float64, device=x.device)
    x64 = x.to(torch.float64).clamp(xs[0], xs[-1])
    j = (torch.searchsorted(xs, x64.contiguous(), right=True) - 1).clamp(0, len(xs) - 2)
    slope = (ys[j + 1] - ys[j]) / (xs[j + 1] - xs[j])
    return (slope * (x64 - xs[j]) + ys[j]).to(x.dtype)


def _custom_drift_nu(self, g_target: Tensor) -> Tensor:
    """aihwkit's ``generate_drift_coefficients`` with ``torch_interp`` for ``numpy.interp``
    (the same clipping to the table's range, one ``randn_like`` draw)."""
    import torch

    table = self.custom_drift_model
    g = g_target.clamp(min(table["g_lst"]), max(table["g_lst"]))
    nu_mean = torch_interp(g, table["g_lst"], table["nu_mean_lst"]).float()
    nu_std = torch_interp(g, table["g_lst"], table["nu_std_lst"]).float()
    nu_drift = torch.abs(nu_mean + nu_std * torch.randn_like(g_target)).clamp(min=0.0)
    return nu_drift * self.drift_scale


def _cmo_drift(self, g_prog: Tensor, drift_noise_param: Tensor, t_inference: float) -> Tensor:
    """aihwkit's ReRAM-CMO relaxation with ``torch.log10`` on the conductances (``math`` on the
    scalars); the same two ``randn_like`` draws in the same order."""
    import torch

    if t_inference == 0:
        return g_prog
    decay, read = self.decay_dict, self.read_dict
    g_mean = g_prog + decay["mean"][0] * math.log(t_inference) * self.drift_scale
    sigma_relaxation = decay["std"][0] * math.log(t_inference) + decay["std"][1]
    g_drift = g_mean + torch.randn_like(g_prog) * sigma_relaxation * self.drift_scale
    accumulated = math.sqrt(math.log((t_inference + read["t_read"]) / (2 * read["t_read"])))
    sigma_read = read["K"] * torch.log10(g_drift) * accumulated
    g_final = g_drift + sigma_read * torch.randn_like(g_prog) * self.read_noise_scale
    return g_final.clamp(min=self.g_min, max=self.g_max)


# aihwkit class name -> (method name, device-agnostic replacement).
DEVICE_AGNOSTIC: dict[str, tuple[str, Callable[..., Tensor]]] = {
    "CustomDriftPCMLikeNoiseModel": ("generate_drift_coefficients", _custom_drift_nu),
    "ReRamCMONoiseModel": ("apply_drift_noise_to_conductance", _cmo_drift),
}


@functools.cache
def _agnostic(name: str) -> type:
    """The subclass of aihwkit's ``name`` with its numpy-on-tensor method replaced. Same name,
    so provenance (``describe_rpu``) reads as before; defined in this module, so a pickled rpu
    config finds it again (``__getattr__`` below)."""
    import aihwkit.inference as inference
    from torch.autograd import no_grad

    method, replacement = DEVICE_AGNOSTIC[name]
    cls = type(name, (getattr(inference, name),), {
        method: no_grad()(replacement), "__module__": __name__,
        "__doc__": f"aihwkit's {name} with a device-agnostic ``{method}`` (analog.devices)."})
    cls.__qualname__ = name
    return cls


def __getattr__(name: str) -> type:
    if name in DEVICE_AGNOSTIC:
        return _agnostic(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def device_config(class_name: str, *, read_noise: float = 0.0,
                  **kwargs: Any) -> Callable[[], Any]:
    """A ``base`` for ``AnalogHW``: aihwkit noise model ``class_name(**kwargs)`` on the ``pcm``
    periphery. Looked up when built, so a model this aihwkit lacks is a clear error there."""
    def build():
        return _on_pcm_periphery(_noise_class(class_name)(**kwargs), read_noise=read_noise)

    return build


def pcm_nu_table(points: Sequence[float] = (0.25, 1, 2.5, 5, 10, 15, 20, 25),
                 g_max: float = 25.0) -> dict[str, list[float]]:
    """``PCMLikeNoiseModel``'s drift law sampled at ``points`` (uS): mean and std of nu."""
    def clip(v: float, lo: float, hi: float) -> float:
        return min(max(v, lo), hi)

    rel = [max(g / g_max, 1e-6) for g in points]
    return {"g_lst": [0.0, *points[1:]] if points[0] > 0 else list(points),
            "nu_mean_lst": [clip(-0.0155 * math.log(r) + 0.0244, 0.049, 0.1) for r in rel],
            "nu_std_lst": [clip(-0.0125 * math.log(r) - 0.0059, 0.008, 0.045) for r in rel]}


def custom_drift_config(table: dict[str, list[float]], g_max: float = 25.0) -> Callable[[], Any]:
    """A ``base`` for ``AnalogHW`` with a custom drift table (keys ``g_lst``, ``nu_mean_lst``,
    ``nu_std_lst``; conductances ascending, in uS, spanning 0..g_max)."""
    return device_config("CustomDriftPCMLikeNoiseModel", custom_drift_model=table, g_max=g_max)


HW.register("reram_cmo")(AnalogHW(
    "reram_cmo", "ReRAM, CMO/HfOx (aihwkit ReRamCMONoiseModel, IBM Zurich; single device, "
                 "9-88.2 uS) + 1% read noise, on the pcm periphery",
    base=device_config("ReRamCMONoiseModel", read_noise=READ_NOISE)))
HW.register("reram_wan2022")(AnalogHW(
    "reram_wan2022", "ReRAM, HfOx NeuRRAM (aihwkit ReRamWan2022NoiseModel, Wan et al. Nature "
                     "2022; g_max 40 uS; drift times 1s, 1d, 2d only) + 1% read noise, on the "
                     "pcm periphery",
    base=device_config("ReRamWan2022NoiseModel", read_noise=READ_NOISE, g_max=40.0),
    times=WAN2022_TIMES))
HW.register("pcm_hermes")(AnalogHW(
    "pcm_hermes", "PCM of the IBM HERMES chip (aihwkit HermesNoiseModel, Le Gallo et al. 2023; "
                  "2 devices per conductance, 4 per weight, g_max 20.7 uS), on the pcm "
                  "periphery",
    base=device_config("HermesNoiseModel")))
HW.register("pcm_custom_drift")(AnalogHW(
    "pcm_custom_drift", "PCM with a custom drift table (aihwkit CustomDriftPCMLikeNoiseModel; "
                        "table = PCMLikeNoiseModel's nu(g) sampled at 0-25 uS), on the pcm "
                        "periphery", base=custom_drift_config(pcm_nu_table())))
