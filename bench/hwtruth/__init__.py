"""The hardware truth: truth architectures scored on a grid of hardware configurations.

Each (architecture, hardware configuration) pair is one unit of work, a JSON file under
``bench/data/hwtruth/units/`` once done: accuracy after 30 days of drift on the whole
Fashion-MNIST test split (10,000 images, ``REPEATS`` programmings, AdaBS on 512 training
images) and the analog energy and tile count of one inference, both through one
``nas.study.hardware.Hardware`` description, the one a hardware study samples. The weights are
the fidelity truth's (``bench.fidelity.truth``, retrained to the same values where this machine
lacks them). Units are resumable across runs and machines, as the fidelity truth's are.
"""
