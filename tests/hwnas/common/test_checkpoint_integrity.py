"""A checkpoint carries a sha256 of its weights and is refused, with the rule, the file, what was
found and the fix, when it is broken (truncated, damaged, changed) or foreign (not a torch file,
not an hwnas checkpoint). A checkpoint written before the checksum still loads, with a warning."""

from __future__ import annotations

import struct
import zipfile
from pathlib import Path

import pytest
import torch

from hwnas.common.checkpoint import (
    DIGEST_KEY,
    FORMAT,
    UnverifiedCheckpointWarning,
    load_torch_file,
    read_checkpoint,
    state_digest,
    write_checkpoint,
)
from hwnas.common.errors import ConfigError

DATA = {"name": "digits", "in_chans": 1, "num_classes": 10, "img_size": 8}


def _state() -> dict[str, torch.Tensor]:
    """One tensor of each kind a net holds: floats of three widths, ints, flags, a scalar and a
    non-contiguous view."""
    g = torch.Generator().manual_seed(0)
    w = torch.randn(6, 4, generator=g)
    return {"conv.weight": w, "conv.weight_t": w.t(), "bn.num_batches_tracked": torch.tensor(7),
            "half": torch.randn(5, generator=g).half(),
            "bf16": torch.randn(3, generator=g).bfloat16(),
            "idx": torch.arange(4), "mask": torch.tensor([True, False, True]),
            "nan": torch.tensor([float("nan"), -0.0, float("inf")])}


def _write(tmp_path: Path, name: str = "m.pt") -> Path:
    return write_checkpoint(tmp_path / name, space="resnet", arch="rn:s16-d1r1c16",
                            state_dict=_state(), data=DATA)


def _bytes(t: torch.Tensor) -> bytes:
    return t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def _refused(path: Path, *needles: str) -> str:
    with pytest.raises(ConfigError) as err:
        read_checkpoint(path)
    text = str(err.value)
    assert str(path) in text and "Fix:" in text, text
    for needle in needles:
        assert needle in text, text
    return text


# -- the checksum -----------------------------------------------------------------------------
def test_round_trip_is_bit_exact_and_carries_the_digest(tmp_path: Path) -> None:
    ckpt = read_checkpoint(_write(tmp_path))
    want = _state()
    assert ckpt["state_dict"].keys() == want.keys()
    for k, t in want.items():
        got = ckpt["state_dict"][k]
        assert got.dtype == t.dtype and got.shape == t.shape and _bytes(got) == _bytes(t), k
    assert ckpt[DIGEST_KEY] == state_digest(want)
    assert len(ckpt[DIGEST_KEY]) == 64 and int(ckpt[DIGEST_KEY], 16) >= 0  # sha256 in hex


def test_digest_is_deterministic_and_independent_of_dict_order() -> None:
    state = _state()
    digest = state_digest(state)
    assert state_digest({k: v.clone() for k, v in state.items()}) == digest
    assert state_digest(dict(reversed(list(state.items())))) == digest
    assert state_digest({k: v.contiguous() for k, v in state.items()}) == digest


@pytest.mark.parametrize("change", ["value", "name", "dtype", "shape", "dropped"])
def test_digest_sees_every_change(change: str) -> None:
    state = _state()
    w = state["conv.weight"]
    if change == "value":
        state["conv.weight"] = w.clone().index_put_((torch.tensor([0]), torch.tensor([0])),
                                                    w[0, 0] + 1e-6)
    elif change == "name":
        state["conv.weights"] = state.pop("conv.weight")
    elif change == "dtype":  # same bytes, read as another type
        state["conv.weight"] = w.view(torch.int32)
    elif change == "shape":  # same bytes, another shape
        state["conv.weight"] = w.reshape(4, 6)
    else:
        del state["mask"]
    assert state_digest(state) != state_digest(_state())


# -- broken files -----------------------------------------------------------------------------
def _tensor_offset(path: Path) -> int:
    """Where the first tensor's bytes start in the file (torch stores zip entries uncompressed)."""
    info = next(i for i in zipfile.ZipFile(path).infolist() if "/data/" in i.filename)
    raw = path.read_bytes()
    name_len, extra_len = struct.unpack("<HH", raw[info.header_offset + 26:info.header_offset + 30])
    return info.header_offset + 30 + name_len + extra_len


@pytest.mark.parametrize("keep", [0.5, -10, 100])
def test_truncated_file_is_refused(tmp_path: Path, keep: float) -> None:
    raw = _write(tmp_path, "full.pt").read_bytes()
    cut = tmp_path / "cut.pt"
    cut.write_bytes(raw[:int(len(raw) * keep)] if isinstance(keep, float) else raw[:keep])
    _refused(cut, "truncated", f"{cut.stat().st_size} bytes")


def test_tensor_bytes_changed_on_disk_are_refused(tmp_path: Path) -> None:
    path = _write(tmp_path)
    raw = bytearray(path.read_bytes())
    raw[_tensor_offset(path) + 1] ^= 0x01  # one bit of one weight: still a valid float
    path.write_bytes(bytes(raw))
    torch.load(path, weights_only=True)  # torch itself reads it without complaint
    _refused(path, "sha256", "changed or damaged")


def test_value_changed_in_the_saved_state_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path)
    ckpt = torch.load(path, weights_only=True)
    ckpt["state_dict"]["idx"][2] = 99
    torch.save(ckpt, path)
    _refused(path, "sha256", ckpt[DIGEST_KEY][:12])


def test_a_digest_that_is_not_a_sha256_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path)
    ckpt = torch.load(path, weights_only=True)
    ckpt[DIGEST_KEY] = 1234
    torch.save(ckpt, path)
    _refused(path, DIGEST_KEY, "1234")


# -- foreign files ----------------------------------------------------------------------------
@pytest.mark.parametrize(("content", "found"), [
    (b"", "empty"),
    (b"arch: rn:s16-d1r1c16\nweights: none\n", "text starting 'arch: rn:s16"),
    (bytes(range(256)) * 2, "512 bytes of binary data"),
])
def test_file_that_is_no_torch_file_is_refused(tmp_path: Path, content: bytes, found: str) -> None:
    path = tmp_path / "model.pt"
    path.write_bytes(content)
    _refused(path, "torch.save", found)


def test_zip_archive_that_is_no_torch_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "model.pt"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("readme.txt", "not a model")
    _refused(path, "torch.save", "cannot be read")


def test_bare_state_dict_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "sd.pt"
    torch.save(_state(), path)
    _refused(path, FORMAT, "bare state_dict", "save_checkpoint")


def test_dict_without_the_fields_is_refused_with_every_missing_field(tmp_path: Path) -> None:
    path = tmp_path / "half.pt"
    torch.save({"format": FORMAT, "space": "resnet", "state_dict": {"w": "not a tensor"}}, path)
    _refused(path, "3 problem", "'arch'", "'data'", "state_dict")


@pytest.mark.parametrize("obj", [[1, 2, 3], {"weights": 1}, {"format": "other/2"}])
def test_other_torch_objects_are_refused(tmp_path: Path, obj: object) -> None:
    path = tmp_path / "x.pt"
    torch.save(obj, path)
    _refused(path, FORMAT)


# -- checkpoints written before the checksum --------------------------------------------------
def test_checkpoint_without_digest_loads_with_a_warning(tmp_path: Path) -> None:
    path = _write(tmp_path)
    ckpt = torch.load(path, weights_only=True)
    del ckpt[DIGEST_KEY]
    torch.save(ckpt, path)
    with pytest.warns(UnverifiedCheckpointWarning, match="cannot be verified") as seen:
        got = read_checkpoint(path)
    assert str(path) in str(seen[0].message)
    assert all(_bytes(got["state_dict"][k]) == _bytes(v) for k, v in _state().items())


# -- other torch files hwnas reads back -------------------------------------------------------
def test_load_torch_file_names_the_role_and_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "state.pt"
    torch.save({"step": 3, "w": torch.ones(2)}, path)
    assert load_torch_file(path, where="resume state", fix="rerun")["step"] == 3
    path.write_bytes(path.read_bytes()[:-30])
    with pytest.raises(ConfigError, match=r"resume state: must be a complete .*Fix: rerun"):
        load_torch_file(path, where="resume state", fix="rerun")


def test_a_damaged_ddp_resume_checkpoint_is_an_error_naming_it(tmp_path: Path) -> None:
    from hwnas.train.ddp import FileStore

    store = FileStore(tmp_path)
    assert store.load() is None  # no checkpoint yet: a fresh start
    store.save({"step": 20, "model": {"w": torch.arange(3.0)}}, {})
    assert store.load()["step"] == 20
    store.path.write_text("")
    with pytest.raises(ConfigError, match="DDP resume checkpoint") as err:
        store.load()
    assert str(store.path) in str(err.value) and f"delete {store.path}" in str(err.value)
