"""The GPU campaign's parts: every GPU figure the project promises, each part one short command.

    python -m bench.gpu.campaign --part latency            # one part, at most 9 minutes
    python -m bench.gpu.campaign --all                     # every part in turn
    python -m bench.gpu.campaign --device cpu --smoke --all --out /tmp/x   # the CPU dry run

A part is a function ``part(ctx) -> Report`` registered in ``PARTS`` (``context.part``); it
measures, then states its figures and the goals they are held to. ``context.write_record`` wraps
a report with the device, versions, command and precision and writes ``<out>/<part>.json``.
The parts live in ``latency`` (latency, predictors, roofline), ``analog_hw`` (analog, hwa) and
``training`` (fit, ddp, study, supernet); ``campaign`` imports them, which registers them,
only after the device is checked: the package imports nothing, so a refused device costs no
import.
"""
