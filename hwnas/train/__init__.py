"""Data sets and on-device loaders, the plain-PyTorch training and evaluation loop, and the DDP
entry point (torchrun, Ray Train)."""
