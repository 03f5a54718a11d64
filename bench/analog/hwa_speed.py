"""HWA training throughput of every engine beside digital training, and ``pcm_static``
evaluation on the fast path beside digital evaluation (NCHW and channels_last), in one run.

    nice -n 10 .venv/bin/python -m bench.analog.hwa_speed --repeats 5

Training: ``--steps`` optimizer steps on batches of ``--batch`` Fashion-MNIST images (forward,
cross-entropy, backward, step and, for HWA, the weight clipping), one thread. Paths: digital
(NCHW, channels_last), the torch HWA engine on ``pcm_static`` (``analog.hwa_torch``, NCHW
and channels_last), aihwkit's C++ tiles on ``pcm_static`` and aihwkit-lightning on ``pcm``.
Evaluation: forward passes over ``--test-limit`` test images in batches of 500, the fast path's
``pcm_static`` (programmed, drifted to 1d) and the digital model. Every path runs once per
repeat in turn and each ratio is taken within its repeat (the host is shared: its load moves
every path of one repeat alike). Writes ``bench/results/analog_hwa_speed.md`` (``--out``).
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from analog.hwa import (
    HwaOptions,
    analog_optimizer,
    hwa_target,
    lightning_model,
    tile_model,
)
from bench import RESULTS, command_line
from bench._results import publish
from bench.analog.speed import _ratios, timed_interleaved
from hwnas.common.provenance import provenance
from hwnas.train.data import load_data
from hwnas.train.loop import FitConfig
from search_spaces import get_space


def _steps(net: nn.Module, opt: torch.optim.Optimizer, batches, hook=None,
           channels_last: bool = False) -> Callable[[], None]:
    net.train()

    def run() -> None:
        for x, y in batches:
            if channels_last:
                x = x.contiguous(memory_format=torch.channels_last)
            loss = F.cross_entropy(net(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if hook is not None:
                hook()
    return run


def _sgd(net: nn.Module) -> torch.optim.Optimizer:
    return torch.optim.SGD(net.parameters(), lr=1e-3, momentum=0.9)


def training_runs(model: nn.Module, data, batches) -> dict[str, Callable[[], None]]:
    from aihwkit_lightning.nn import AnalogLayerBase

    from analog.hwa_torch import TorchHwaModel

    runs = {}
    for cl in (False, True):
        net = copy.deepcopy(model)
        if cl:
            net = net.to(memory_format=torch.channels_last)
        runs[f"digital{', channels_last' if cl else ''}"] = _steps(net, _sgd(net), batches,
                                                                    channels_last=cl)
    static = hwa_target("pcm_static")
    ranged = copy.deepcopy(model)
    for cl in (False, True):
        net = TorchHwaModel(copy.deepcopy(ranged), static.rpu_config(),
                            weight_noise=static.hwa.weight_noise)
        if cl:
            net = net.to(memory_format=torch.channels_last)
        layers = net.layers()

        def clip(layers=layers) -> None:
            for layer in layers:
                layer.clip_weights(3.0)
        runs[f"torch engine, pcm_static{', channels_last' if cl else ''}"] = _steps(
            net, _sgd(net), batches, clip, channels_last=cl)
    tiles = tile_model(model, hwa_target("pcm_static", hwa=HwaOptions(engine="aihwkit")))
    runs["aihwkit C++ tiles, pcm_static"] = _steps(
        tiles, analog_optimizer(tiles, FitConfig(optimizer="sgd", lr=1e-3)), batches)
    light = lightning_model(model, hwa_target("pcm"))
    light_layers = [m for m in light.modules() if isinstance(m, AnalogLayerBase)]

    def clip_light() -> None:
        with torch.no_grad():
            for layer in light_layers:
                layer.clip_weights()
    runs["aihwkit-lightning, pcm"] = _steps(light, _sgd(light), batches, clip_light)
    return runs


def eval_runs(model: nn.Module, data, limit: int) -> dict[str, Callable[[], None]]:
    from analog.fast import FastAnalogModel
    from analog.static_io import quantile_ranges, static_config

    x = data.x_test[:limit]
    rpu = static_config()
    # eval mode like the digital model: batch norms on their running statistics
    fast = FastAnalogModel(quantile_ranges(model.eval(), rpu, data.x_train[:512]), rpu).eval()
    fast.manual_seed(0)
    fast.drift_analog_weights(86400.0)
    cl_model = copy.deepcopy(model).to(memory_format=torch.channels_last).eval()

    def loop(net: nn.Module, cl: bool = False) -> Callable[[], None]:
        def run() -> None:
            with torch.inference_mode():
                for i in range(0, len(x), 500):
                    part = x[i:i + 500]
                    net(part.contiguous(memory_format=torch.channels_last) if cl else part)
        return run

    return {"eval digital": loop(model.eval()), "eval digital, channels_last": loop(cl_model,
                                                                                      True),
            "eval fast path, pcm_static": loop(fast)}


def table(wall: dict[str, list[float]], images: int, bases: tuple[str, str]) -> list[str]:
    lines = [f"| path | img/s median | img/s min-max | ratio to {bases[0]} | ratio to "
             f"{bases[1]} |", "|---|---|---|---|---|"]
    for name, s in wall.items():
        rates = [images / t for t in s]
        lines.append(f"| {name} | {statistics.median(rates):.0f} | {min(rates):.0f}-"
                     f"{max(rates):.0f} | {_ratios(s, wall[bases[0]])} | "
                     f"{_ratios(s, wall[bases[1]])} |")
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--arch", default="rn:s16-d1r1c16-d1r1c32")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--test-limit", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default=str(RESULTS / "analog_hwa_speed.md"))
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    data = load_data("fashion_mnist", test_limit=args.test_limit,
                     train_limit=args.batch * args.steps)
    model = get_space("resnet").build(args.arch, in_chans=data.in_chans,
                                      num_classes=data.num_classes, img_size=data.img_size)
    batches = list(zip(data.x_train.split(args.batch), data.y_train.split(args.batch),
                       strict=True))
    load_before = os.getloadavg()[0]
    train = timed_interleaved(training_runs(model, data, batches), args.repeats)[0]
    evals = timed_interleaved(eval_runs(model, data, args.test_limit), args.repeats)[0]
    load_after = os.getloadavg()[0]
    prov = provenance("cpu")
    text = "\n".join([
        "# HWA training and pcm_static evaluation speed, every engine beside digital", "",
        f"Command: `{command_line()}` ({prov.get('time_utc')}, git {prov.get('git')}). "
        f"{args.arch}, {args.threads} thread(s), {args.repeats} repeats; every path runs once "
        "per repeat in turn and each ratio (time / baseline time, median [min-max]) is taken "
        f"within its repeat. The host may be shared (load average, 1 min, "
        f"{load_before:.2f} before / {load_after:.2f} after, on {os.cpu_count()} cores): the "
        "absolute rates move with any neighbours, the ratios of one run are the figures.", "",
        f"## HWA training: {args.steps} steps of {args.batch} images (forward, loss, backward, "
        "step, clipping)", "",
        "fp32; the torch engine trains with pcm_static's full forward (8-bit DAC/ADC, learned "
        "static ranges, PCM read noise, IR drop, output noise, 5% weight noise, per-channel "
        "clipping at 3 sigma); lightning has no read noise or IR drop (its `pcm`).", "",
        *table(train, args.batch * args.steps, ("digital", "digital, channels_last")), "",
        f"## pcm_static evaluation: {args.test_limit} test images, batches of 500", "",
        *table(evals, args.test_limit, ("eval digital", "eval digital, channels_last")), "",
        f"device: {prov.get('device')}; versions: {prov.get('versions')}"])
    publish(text, Path(args.out) if args.out else None)


if __name__ == "__main__":
    main()
