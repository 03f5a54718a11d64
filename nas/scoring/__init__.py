"""Scoring one candidate: the evaluator, training/analog glue, tables, supernets."""
