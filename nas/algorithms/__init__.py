"""Multi-objective math: Pareto fronts and hypervolume, promotion rules, samplers."""
