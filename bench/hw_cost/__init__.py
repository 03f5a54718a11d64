"""Hardware-cost benchmarks: latency repeatability, predictors, profiles, roofline, forms."""
