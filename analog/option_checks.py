"""Overrides a hardware model cannot apply, as clear errors instead of silent records.

``AnalogOptions`` are written onto an aihwkit rpu config after its noise model was built, so
aihwkit's own constructor checks never see them. These functions run those checks (or aihwkit's
own check functions) on the overridden values:

* a noise scale (``prog_noise_scale``, ``read_noise_scale``, ``drift_scale``) the noise model
  has no attribute for would be recorded in ``hw_config`` without changing anything
  (``ReRamWan2022NoiseModel`` has one ``noise_scale`` for everything);
* ``g_max`` must exceed the conductance converter's ``g_min`` (aihwkit's converter rule) and,
  for ``HermesNoiseModel``, stay within the characterised range (aihwkit asserts it);
* ``tile="torch"`` must pass aihwkit's torch-tile support checks, which refuse e.g. per-MVM read
  noise (``forward.w_noise``) and IR drop; the fast path would otherwise emulate a config
  aihwkit's torch tile cannot run.
"""

from __future__ import annotations

from typing import Any

from hwnas.common.errors import Problem

SCALES = ("prog_noise_scale", "read_noise_scale", "drift_scale")


def scale_problems(where: str, noise: Any, values: dict[str, float | None]) -> list[Problem]:
    """A problem for each noise scale asked for that ``noise`` has no attribute for."""
    have = [k for k in (*SCALES, "noise_scale") if hasattr(noise, k)]
    return [Problem(where, f"{name} needs a noise model with that parameter; "
                    f"{type(noise).__name__} has only {have or 'no scales'}", value,
                    f"drop {name}, or pick a model that has it (`hwnas analog list`)")
            for name, value in values.items() if value is not None and not hasattr(noise, name)]


def g_max_problems(where: str, noise: Any, g_max: float) -> list[Problem]:
    """aihwkit's checks on ``g_max`` that a post-construction override would skip."""
    out = []
    g_min = getattr(getattr(noise, "g_converter", None), "g_min", None)
    if g_min is not None and not g_max > g_min:
        out.append(Problem(where, f"g_max must exceed the conductance converter's g_min "
                           f"({g_min} uS; aihwkit: 'g_min should be smaller than g_max')",
                           g_max, f"use g_max > {g_min}"))
    if type(noise).__name__ == "HermesNoiseModel":
        limit = hermes_g_max(noise.num_devices)
        if g_max > limit:
            out.append(Problem(where, f"g_max must be <= {limit} uS, the largest conductance "
                               f"HERMES characterised for {noise.num_devices} device(s) per "
                               "weight (aihwkit asserts it)", g_max, f"use g_max <= {limit}"))
    return out


def hermes_g_max(num_devices: int) -> float:
    """The characterised g_max of aihwkit's ``HermesNoiseModel``, read from its own check."""
    from aihwkit.inference import HermesNoiseModel

    return float(HermesNoiseModel(num_devices=num_devices).g_max)


def aihwkit_problems(where: str, checks: Any, rule: str, fix: str) -> list[Problem]:
    """Run aihwkit's own support checks, ``(check, argument)`` pairs: each refusal becomes one
    problem under ``rule`` with aihwkit's reason as the value."""
    from aihwkit.exceptions import ConfigError as AihwkitConfigError

    out = []
    for check, arg in checks:
        try:
            check(arg)
        except AihwkitConfigError as err:
            out.append(Problem(where, rule, str(err), fix))
    return out


def torch_tile_problems(where: str, rpu: Any) -> list[Problem]:
    """aihwkit's own torch-tile support checks on ``rpu`` (a ``TorchInferenceRPUConfig``)."""
    from aihwkit.simulator.tiles.analog_mvm import AnalogMVM
    from aihwkit.simulator.tiles.torch_tile import TorchSimulatorTile

    if type(rpu.forward).__name__ == "IOParametersIRDropT":
        return []  # ir_drop_t: its own tile's checks (analog.inference_options)
    return aihwkit_problems(
        where, ((TorchSimulatorTile.check_rpu_config_support, rpu),
                (AnalogMVM.check_support, rpu.forward)),
        "tile='torch' needs a config aihwkit's torch tile supports",
        "use tile='cpp' (the default) for this hardware model")
