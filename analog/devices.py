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
  Nat. Electron. 6, 680-693, 2023; Khaddam-Aljameh et al., JSSC 2022), two devices per weight
  (multi-step programming, Vasilopoulos et al., TED 2023), g_max 20.7 uS, t_0 300 s.
* ``pcm_custom_drift``: ``CustomDriftPCMLikeNoiseModel``, PCM programming and read noise with a
  user-given drift table (mean and std of the drift exponent nu at listed conductances, linearly
  interpolated; N. Li et al., Adv. Electron. Mater. 2023, as cited by aihwkit). The registered
  table samples ``PCMLikeNoiseModel``'s own nu(g) law (Nandakumar et al., ICECS 2019) at
  0-25 uS, so it matches ``pcm`` up to interpolation; ``custom_drift_config`` builds others.

aihwkit's ReRAM docstrings advise about 1 % short-term read noise through ``forward.w_noise``
(``ADDITIVE_CONSTANT``), which both ReRAM entries set: ``reram_wan2022`` has no read noise of
its own, and ``reram_cmo`` adds its 1/f term only after programming.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from analog.aimc import AnalogHW, columnwise_omega1
from analog.hw import HW

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
    """An aihwkit noise-model class by name (AttributeError where this aihwkit lacks it)."""
    import aihwkit.inference as inference

    return getattr(inference, name)


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
                  "2 devices per weight, g_max 20.7 uS), on the pcm periphery",
    base=device_config("HermesNoiseModel")))
HW.register("pcm_custom_drift")(AnalogHW(
    "pcm_custom_drift", "PCM with a custom drift table (aihwkit CustomDriftPCMLikeNoiseModel; "
                        "table = PCMLikeNoiseModel's nu(g) sampled at 0-25 uS), on the pcm "
                        "periphery", base=custom_drift_config(pcm_nu_table())))
