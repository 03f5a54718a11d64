"""What each registered analog model does not describe, stated where its results are.

Each entry's caveats sit on its registry entry (``AnalogHW.caveats``), are printed by
``hwnas analog list`` and stored with every result (``DriftResult.hw_config["caveats"]``).
"""

from __future__ import annotations

PCM_PERIPHERY = (
    "idealised periphery (aihwkit InferenceRPUConfig defaults): dynamic per-vector abs-max "
    "noise management, iterative bound management (a saturated MVM re-runs at half its input "
    "scale, up to max_bm_factor), 512x512 tiles; HERMES and aihwkit's standard HWA preset use "
    "static input ranges, constant noise management and no bound management, and the energy "
    "model charges one MVM per input vector (re-runs are not charged)")

CAVEATS: dict[str, tuple[str, ...]] = {
    "pcm": (PCM_PERIPHERY,),
    "pcm_aihwkit_default": (
        "weight scaling omega 0: weights are not rescaled to g_max, so small layers use a "
        "small part of the conductance range (tens of points below pcm at 1 d)",
        PCM_PERIPHERY),
    "pcm_preset_io": (
        "weight scaling omega 0 (no rescaling to g_max); otherwise aihwkit's PresetIOParameters "
        "with dynamic noise and bound management",),
    "pcm_ideal": ("no noise and no quantization: a check of the plumbing, equal to digital",),
    "pcm_hwa": (
        "input ranges come from HWA training, or from aihwkit's init_from_data rule on "
        "calibration images when the model was trained digitally; no bound management",),
    "pcm_static": (
        "HERMES-like periphery, not HERMES: aihwkit's StandardHWATrainingPreset I/O (8-bit, "
        "output noise 0.04, PCM read noise, IR drop) with PCMLikeNoiseModel devices, not the "
        "chip's measured periphery",
        "input ranges are fixed after training from the 99.995% quantile of calibration "
        "inputs (aihwkit CACHE_QUANTILE); inputs beyond them clip in every MVM",),
    "reram_cmo": (
        "conductance relaxation shifts every device by the same -0.089 uS ln(t) whatever its "
        "target; with one device per weight (g_min 9 uS) that is a common-mode offset of about "
        "-0.025 weight units (of each row's max |w|) at 1 d, which global drift compensation (a "
        "gain) cannot remove",
        "the 1% read noise is aihwkit's docstring advice, not a fit to these devices",
        PCM_PERIPHERY),
    "reram_wan2022": (
        "defined only at 1 s, 1 d and 2 d (polynomial fits at those times)",
        "one noise_scale for programming and drift: prog_noise_scale, read_noise_scale and "
        "drift_scale are refused",
        "the 1% read noise is aihwkit's docstring advice, not a fit to these devices",
        PCM_PERIPHERY),
    "pcm_hermes": (
        "'two devices per weight' is two PCM devices per conductance of a differential pair: "
        "four devices per weight",
        "aihwkit's own warning: its 2-device drift applies as if both devices hold the same "
        "conductance, not the chip's dynamic mapping (Vasilopoulos et al. 2023), so drift is "
        "worse than measured on the chip",
        "HERMES' own periphery (8-bit static-range I/O) is not modelled: this entry runs on the "
        "pcm periphery",
        PCM_PERIPHERY),
    "pcm_hermes_static": (
        "HERMES-like periphery, not HERMES: aihwkit's StandardHWATrainingPreset I/O (8-bit, "
        "output noise 0.04, PCM read noise of the preset in every MVM, IR drop) around "
        "HermesNoiseModel devices, not the chip's measured periphery",
        "aihwkit's own warning: its 2-device drift applies as if both devices hold the same "
        "conductance, not the chip's dynamic mapping (Vasilopoulos et al. 2023), so drift is "
        "worse than measured on the chip",
        "input ranges are fixed after training from the 99.995% quantile of calibration "
        "inputs (aihwkit CACHE_QUANTILE); inputs beyond them clip in every MVM",),
    "pcm_custom_drift": (
        "the registered drift table samples PCMLikeNoiseModel's nu(g) at 0-25 uS: it matches "
        "pcm up to linear interpolation, not a new device",
        PCM_PERIPHERY),
}
