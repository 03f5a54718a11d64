"""What accuracy a model keeps on non-ideal hardware: N-bit and int8 quantization (torchao PT2E),
analog in-memory computing with aihwkit (PCM noise, drift, compensation), HWA training and drift
experiments. Hardware models are applied from outside: ``analog.apply(model, hw)``."""
