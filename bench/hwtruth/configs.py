"""What the hardware truth scores: its architectures, its hardware grid and the free heuristics."""

from __future__ import annotations

from nas.study.hardware import Hardware

# Resnet fidelity-truth archs across the latency bands (bench/data/fidelity/bands.json), all with
# CPU-trained weights (retrainable here from their recipe and seed), cheapest to train first.
ARCHS = (
    "rn:s32-d2r1c16",          # 0.85 ms band, 12.7 k params
    "rn:s32-d2r2c16",          # 1.5 ms
    "rn:s16-d1r3c16",          # 0.85 ms
    "rn:s24-d2r1c24",          # 0.85 ms
    "rn:s16-d2r3c16",          # 1.5 ms
    "rn:s16-d3r1c24",          # 1.5 ms
    "rn:s16-d3r1c16",          # 0.85 ms
    "rn:s16-d3r1c32",          # 2.2 ms, 52 k params
)

BASE = "pcm_static"  # the hardware model the studies score; its I/O is 8-bit (the maximum here)


def _hw(device: str, adc: int, dac: int, read: str, digital: str) -> Hardware:
    return Hardware(device=device, adc_bits=adc, dac_bits=dac, read_mode=read, compensation=True,
                    digital=digital)


# Ten chips over the searched dimensions: ADC and DAC bits, read mode, the digital layers and
# the device (two PCM devices on one HERMES-like periphery). Tile size and drift compensation
# stay at the periphery's own (256, global compensation).
CONFIGS = (
    _hw("pcm_static", 8, 8, "four_phase", "none"),        # maximum bits, all analog
    _hw("pcm_static", 8, 8, "four_phase", "first_last"),  # maximum bits, first+last digital
    _hw("pcm_static", 8, 8, "one_phase", "none"),
    _hw("pcm_static", 6, 8, "one_phase", "none"),
    _hw("pcm_static", 6, 6, "four_phase", "none"),
    _hw("pcm_static", 4, 6, "four_phase", "none"),
    _hw("pcm_static", 6, 6, "one_phase", "first_last"),
    _hw("pcm_static", 4, 6, "one_phase", "first_last"),
    _hw("pcm_hermes_static", 8, 8, "four_phase", "none"),
    _hw("pcm_hermes_static", 6, 8, "one_phase", "first_last"),
)

# The hardware a user picks for free, without searching it: each a rule on (arch, chip). On
# pcm_static the maximum bits are its defaults (8-bit I/O, four-phase), so "maximum bits
# everywhere" is also "all-analog as shipped".
HEURISTICS = {
    "max bits, all analog": lambda arch, hw: hw == CONFIGS[0],
    "max bits, first+last digital": lambda arch, hw: hw == CONFIGS[1],
    "size-greedy arch, max bits": lambda arch, hw: arch == ARCHS[-1] and hw == CONFIGS[0],
}
