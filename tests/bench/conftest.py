"""Fixtures shared by the fidelity bench's tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.fidelity import truth


@pytest.fixture
def tiny_truth(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The truth's folders under tmp_path, and training cut to a few steps."""
    monkeypatch.setattr(truth, "ROOT", tmp_path)
    monkeypatch.setattr(truth, "DATA", tmp_path / "bench/data/fidelity")
    monkeypatch.setattr(truth, "MODELS", tmp_path / ".hwnas_cache/fidelity")
    monkeypatch.setitem(truth.TRUTH, "train", {**truth.TRUTH["train"], "epochs": 0.01,
                                               "warmup_epochs": 0.0})
    return tmp_path
