"""Every section of BENCHMARKS.md: its result file, the commands that produced it and, where a
script does not rewrite the whole file, what is kept as recorded. ``bench/collect.py`` builds
BENCHMARKS.md from this list in this order, so a section is added here, never by hand."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Section:
    """One section: ``bench/results/<name>.md``.

    ``commands``: the commands that wrote the file or measured its figures; each must appear in
    the file's text, so every section names how it was made. ``reading``: the reading written
    after a run lives in ``bench/results/readings/<name>.md``, so rerunning the script rewrites
    the figures and keeps it. ``kept``: empty when the file is
    wholly a script's output; else what in it is kept as recorded text (readings, earlier runs,
    runs of commands that print rather than write) that rerunning its commands does not rewrite.
    """

    name: str
    commands: tuple[str, ...]
    kept: str = ""
    optional: bool = False  # left out while its file does not exist (a run still to come)
    reading: bool = False  # bench/results/readings/<name>.md follows the script's output


READING = "the reading under the figures"
SECTIONS: tuple[Section, ...] = (
    Section("search_space_sizes", ("python -m bench.search.sizes",)),
    Section("search_spaces", ("python -m bench.search.spaces",), reading=True),
    Section("train_loop", ("python -m bench.train.loop",), reading=True),
    Section("fmnist_train", ("hwnas train",),
            "two runs of `python -m bench.train.fmnist` (it prints this `hwnas train` command) "
            "and the reading under them"),
    Section("hw_cost", ("python -m bench.hw_cost.latency", "python -m bench.hw_cost.predictor",
                        "python -m bench.hw_cost.roofline"),
            "the first (2026-11-23) runs of the three scripts and their readings; the current "
            "runs are the three sections that follow"),
    Section("hw_cost_latency", ("python -m bench.hw_cost.latency",),
            "the 2026-11-23 repeatability figures and the reading after the script's output"),
    Section("hw_cost_predictor", ("python -m bench.hw_cost.predictor",)),
    Section("hw_cost_roofline", ("python -m bench.hw_cost.roofline",)),
    Section("analog", ("python -m bench.analog.speed", "python -m bench.analog.drift_study"),
            "the scripts' tables from several runs, each under its command, with the readings"),
    Section("nas", ("hwnas run quickstart", "tests/nas/"),
            "all of it (quickstart timings and the reliability table); no script writes it"),
    Section("nas_search_quality", ("python -m bench.search.quality",
                                   "python -m bench.search.sh_live"),
            "the readings between and after the scripts' marked blocks"),
    Section("search_conditional", ("python -m bench.search.conditional",), optional=True),
    Section("sh_equal_time", ("python -m bench.search.sh_equal_time",),
            "the text around the marked block (arms, reading, load, device); the block is "
            "rendered by --render from sh_equal_time.json"),
    Section("startup_imports", ("python -m bench.startup.imports",)),
    Section("nas_ray_overhead", ("python -m bench.ray.overhead",), reading=True),
    Section("finalize", ("python -m bench.train.distill", "python -m bench.train.prune_latency",
                         "python -m bench.train.ddp")),
    Section("analog_depth", ("hwnas analog list", "python -m bench.analog.speed",
                             "hwnas analog-eval", "python -m bench.analog.energy"),
            "the marked blocks assembled from the commands named in each, with the readings; "
            "`python -m bench.analog.speed` rewrites its speed block, the reading under it "
            "is kept"),
    Section("analog_energy", ("python -m bench.analog.energy --sensitivity",), reading=True),
    Section("analog_hwa_match", ("python -m bench.analog.hwa_match",)),
    Section("analog_hwa_speed", ("python -m bench.analog.hwa_speed",)),
    Section("default_switch", ("hwnas run", "python -m bench.analog.default_switch"),
            reading=True),
    # The report copies in its findings from bench/data/fidelity/findings.md.
    Section("fidelity", ("python -m bench.fidelity report",)),
    Section("fidelity_equal_cost", ("python -m bench.fidelity equal-cost",), reading=True),
    Section("hw_cost_forms", ("python -m bench.hw_cost.forms",)),
    Section("hw_cost_profile", ("python -m bench.hw_cost.profiles",)),
    Section("mapping_front", ("python -m bench.analog.mapping_front",), READING),
    Section("ray_multinode", ("python -m bench.ray.multinode",)),
    Section("supernet", ("python -m bench.fidelity.supernet",),
            "the GPU and CPU runs, each under its commands, with the readings"),
    Section("gpu", ("python -m bench.gpu.campaign",), optional=True),
    Section("analognas_proxies", ("python -m bench.analognas",), optional=True, reading=True),
    Section("hwtruth", ("python -m bench.hwtruth report",), optional=True, reading=True),
    Section("hwa_truth", ("python -m bench.hwtruth hwa-report",), optional=True, reading=True),
)
