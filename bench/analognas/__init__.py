"""Zero-cost proxies judged against third-party analog truth: AnalogNAS-Bench (PyPI
``analog-nasbench``, 15,625 NAS-Bench-201 cells on CIFAR-10: digital, HWA at t0 and HWA after
drift). ``python -m bench.analognas --help``."""
