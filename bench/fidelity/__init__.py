"""Fidelity benchmarks: how well scoring recipes and supernets rank architectures
(``python -m bench.fidelity <subcommand>``)."""
