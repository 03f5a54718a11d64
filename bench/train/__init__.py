"""Training and finalize benchmarks: train loop, Fashion-MNIST, distillation, pruning, DDP."""
