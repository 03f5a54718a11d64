"""A Ray trial copied into the study keeps where it ran and how long it took: trials.csv carries
``ray_node_id``, ``hostname`` and ``duration_s`` (docs/multi_node.md)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pandas as pd
from study_files import tabular_raw

from nas.search.ray_utils import copy_trial
from nas.study import store
from nas.study.config import validate_study


def test_trials_csv_says_where_and_how_long_a_ray_trial_ran(tmp_path: Path) -> None:
    cfg = validate_study(tabular_raw("where", n_trials=2, backend="ray"))
    study = store.create_or_load(cfg, store.open_storage(cfg.storage_url(tmp_path)))
    config = {"arch": "", **cfg.search_space().decode(
        "|nor_conv_3x3~0|+|none~0|none~1|+|none~0|none~1|none~2|")}
    result = {**{f"objective__{o.key}": 0.5 for o in cfg.objectives_resolved()},
              "ray_node_id": "ab12", "hostname": "node-7", "time_total_s": 12.5}
    trial = SimpleNamespace(trial_id="t1", config=config, last_result=result, checkpoint=None,
                            error_file=None)  # what copy_trial reads of a Ray Trial
    copy_trial(cfg, study, tmp_path, trial, errored=False)
    store.write_trials(tmp_path, study)
    row = pd.read_csv(tmp_path / "trials.csv").iloc[0]
    assert (row["ray_node_id"], row["hostname"], row["duration_s"]) == ("ab12", "node-7", 12.5)
