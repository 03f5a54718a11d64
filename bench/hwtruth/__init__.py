"""The hardware truth: truth architectures scored on a grid of hardware configurations.

Each (architecture, hardware configuration) pair is one unit of work, a JSON file under
``bench/data/hwtruth/units/`` once done: accuracy after 30 days of drift on the whole
Fashion-MNIST test split (10,000 images, ``REPEATS`` programmings, AdaBS on 512 training
images) and the analog energy and tile count of one inference, both through one
``nas.study.hardware.Hardware`` description, the one a hardware study samples. The weights are
the fidelity truth's (``bench.fidelity.truth``), retrained from their recipe and seed where this
machine lacks them. A retraining is not bit-identical to the record's run (other software or
thread counts since): on 2026-11-29 the four retrained archs scored -0.0024 to +0.0055 digital
accuracy from their records, against a training-seed SD of 0.0034; each unit stores the digital
accuracy of the weights it scored (``weights_acc_digital``) beside the record's (units scored
before that field existed lack it). Units are resumable across runs and machines, as the fidelity
truth's are.
"""
