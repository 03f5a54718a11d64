"""``evaluator: supernet``: candidates inherit their weights from one trained supernet.

The supernet is loaded once per process (or trained as the study's step 0 when its checkpoint
is missing; a file lock lets one worker train while the others wait). Each candidate is
extracted as the space's own model, its BatchNorm statistics re-estimated on ``bn_images``
training images, and then scored by the evaluator's usual code: digital accuracy, every
hardware model at its drift times, and latency (measured on the space's model of the arch, the
same structure as the extracted one). ``nas.refine`` fine-tunes the top front members
standalone from their inherited weights and exports them.
"""

from __future__ import annotations

import fcntl
import json
import time
from pathlib import Path
from typing import Any

from torch import nn

from hwnas.common.errors import ConfigError
from hwnas.train.data import DataSplits
from hwnas.train.supernet import SupernetTrainConfig, train_supernet
from nas.study.config import StudyConfig
from search_spaces.supernet import Supernet, build_supernet
from search_spaces.supernet.load import inherit, load_supernet

_NETS: dict[tuple[str, str], Any] = {}  # (checkpoint, space) -> (Supernet, metadata)


def checkpoint_path(cfg: StudyConfig) -> Path:
    return Path(cfg.supernet.checkpoint or Path("runs") / cfg.name / "supernet.pt")


def train_config(cfg: StudyConfig) -> SupernetTrainConfig:
    """Step 0's training config: the study's data subset and seed, then ``supernet.train``."""
    base = {"space": cfg.space, "data": cfg.data.name, "train_limit": cfg.data.train_limit,
            "seed": cfg.seed}
    try:
        return SupernetTrainConfig(**{**base, **cfg.supernet.train})
    except TypeError as err:
        raise ConfigError.one("supernet.train", "takes SupernetTrainConfig fields only",
                              sorted(cfg.supernet.train), f"fix the field names ({err})") from None


def _train_once(cfg: StudyConfig, path: Path) -> None:
    """Train the missing supernet, once across processes (others wait on the lock)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not path.exists():
            summary = train_supernet(train_config(cfg), path.with_suffix(".partial.pt"),
                                     build=build_supernet, resume=True)
            path.with_suffix(".partial.pt").replace(path)
            path.with_suffix(".json").write_text(json.dumps(summary, indent=1))


def supernet_for(cfg: StudyConfig, data: DataSplits) -> tuple[Supernet, dict[str, Any]]:
    """The study's supernet and its metadata, loaded once per process."""
    path = checkpoint_path(cfg)
    key = (str(path.resolve()), cfg.space)
    if key not in _NETS:
        if not path.exists():
            if cfg.supernet.checkpoint:
                raise ConfigError.one("supernet.checkpoint", "must be an existing file",
                                      str(path), "train it with `hwnas supernet train "
                                      f"{cfg.space} --out {path}` or leave it unset")
            _train_once(cfg, path)
        net, meta = load_supernet(path, space=cfg.space)
        shape = {"in_chans": data.in_chans, "num_classes": data.num_classes,
                 "img_size": data.img_size}
        if any(meta[k] != v for k, v in shape.items()):
            raise ConfigError.one("supernet.checkpoint", "must match the study's data shape",
                                  {k: meta[k] for k in shape}, f"train one for {shape}")
        _NETS[key] = (net, meta)
    return _NETS[key]


def inherited_model(cfg: StudyConfig, data: DataSplits, arch: str, metrics: dict[str, float],
                    info: dict[str, Any]) -> nn.Module:
    """``arch`` with inherited weights and recalibrated BN; records its time and source."""
    net, meta = supernet_for(cfg, data)
    t0 = time.perf_counter()
    model = inherit(net, arch, data.x_train[:cfg.supernet.bn_images])
    metrics["inherit_seconds"] = time.perf_counter() - t0
    metrics["supernet_train_seconds"] = float(meta["seconds"])
    info |= {"evaluator": "supernet", "supernet": str(checkpoint_path(cfg)),
             "supernet_steps": meta["step"], "supernet_hwa_noise": meta["config"]["hwa_noise"],
             "bn_images": min(cfg.supernet.bn_images, len(data.x_train))}
    return model
