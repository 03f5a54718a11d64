"""Analog benchmarks: evaluation speed, energy model, drift study, layer-wise mapping."""
