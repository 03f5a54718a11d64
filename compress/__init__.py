"""Structured pruning (Torch-Pruning) and knowledge distillation for the Pareto winners."""
