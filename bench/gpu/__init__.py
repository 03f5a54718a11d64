"""The GPU campaign's parts: every GPU figure the project promises, each part one short command.

    python bench/gpu_campaign.py --part latency            # one part, at most 9 minutes
    python bench/gpu_campaign.py --all                     # every part in turn
    python bench/gpu_campaign.py --device cpu --smoke --all --out /tmp/x   # the CPU dry run

A part is a function ``part(ctx) -> Report`` registered in ``PARTS`` (``context.part``); it
measures, then states its figures and the goals they are held to. ``context.write_record`` wraps
a report with the device, versions, command and precision and writes ``<out>/<part>.json``.
The parts live in ``latency`` (latency, predictors, roofline), ``analog_hw`` (analog, hwa) and
``training`` (fit, ddp, study, supernet); importing this package registers them all.
"""

from __future__ import annotations

from gpu import analog_hw, latency, training  # noqa: F401  (register the parts)
from gpu.context import PARTS, Context, Report

__all__ = ["PARTS", "Context", "Report"]
