"""What a model costs on hardware: measured latency (CPU/CUDA), FLOPs/MACs, memory, roofline
placement, the analog tile cost model, latency predictors and a persistent cost cache."""
