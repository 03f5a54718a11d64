"""`hwnas spaces ...` through ``nas.cli.main``, output captured."""

from __future__ import annotations

import json

import pytest

from nas.cli import main
from search_spaces import get_space, list_spaces


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(["spaces", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_list_shows_every_space_with_size(capsys):
    rc, out, _ = run(capsys, "list")
    assert rc == 0
    lines = out.strip().splitlines()
    assert [ln.split()[0] for ln in lines] == list_spaces()
    nb = next(ln for ln in lines if ln.startswith("nb201"))
    assert "15,625" in nb and "NAS-Bench-201" in nb


def test_list_pattern(capsys):
    assert run(capsys, "list", "*net*")[1].split()[0] == "resnet"


@pytest.mark.parametrize("name", list_spaces())
def test_sample_prints_valid_archs_deterministically(capsys, name):
    rc, out, _ = run(capsys, "sample", name, "-n", "3", "--seed", "4")
    assert rc == 0
    rows = out.strip().splitlines()[2:]
    assert len(rows) == 3
    space = get_space(name)
    for row in rows:
        arch, params, macs = row.split()
        space.validate(arch)
        assert params[0].isdigit() and macs[0].isdigit()
    assert run(capsys, "sample", name, "-n", "3", "--seed", "4")[1] == out


def test_sample_json_counts_match_shape(capsys):
    rc, out, _ = run(capsys, "sample", "resnet", "-n", "2", "--data-shape", "3,32,32",
                     "--classes", "5", "--json")
    data = json.loads(out)
    assert rc == 0 and data["input_shape"] == [3, 32, 32] and data["classes"] == 5
    arch = data["archs"][0]["arch"]
    model = get_space("resnet").build(arch, in_chans=3, num_classes=5, img_size=32)
    assert data["archs"][0]["params"] == sum(p.numel() for p in model.parameters())
    assert data["archs"][0]["macs"] > 0


def test_sample_takes_shape_from_data_set_registry(capsys):
    rc, out, _ = run(capsys, "sample", "vit", "-n", "1", "--data", "digits")
    assert rc == 0 and "input 1x8x8, 10 classes" in out


def test_show_grammar_and_arch(capsys):
    rc, out, _ = run(capsys, "show", "resnet")
    assert rc == 0 and out.strip() == get_space("resnet").grammar()
    rc, out, _ = run(capsys, "show", "vit", "vit:p4-e64-d2-h4-m2", "--json")
    info = json.loads(out)
    assert rc == 0 and info["arch"] == "vit:p4-e64-d2-h4-m2"
    assert info["features"]["depth"] == 2.0


@pytest.mark.parametrize("argv, words", [
    (["sample", "nope"], ["space", "must be one of", "'nope'", "Fix:"]),
    (["sample", "vit", "--data-shape", "1,28"], ["--data-shape", "'1,28'", "Fix:"]),
    (["sample", "vit", "--data-shape", "1,28,32"], ["H == W", "Fix:"]),
    (["sample", "vit", "-n", "0"], ["-n", "must be >= 1"]),
    (["sample", "vit", "--data", "nope"], ["data set", "'nope'"]),
    (["sample", "vit", "--classes", "1"], ["num_classes", "got 1"]),
    (["show", "vit", "vit:p3-e64-d2-h4-m2"], ["patch must be one of 2|4|8", "Arch string"]),
])
def test_bad_input_is_one_clear_error(capsys, argv, words):
    rc, out, err = run(capsys, *argv)
    assert rc == 2 and out == ""
    assert err.startswith("hwnas: error: ")
    for word in words:
        assert word in err


@pytest.mark.parametrize("argv", [[], ["list"], ["sample"], ["show"]])
def test_help_everywhere(capsys, argv):
    with pytest.raises(SystemExit) as exc:
        main(["spaces", *argv, "--help"])
    assert exc.value.code == 0
    assert "usage: hwnas spaces" in capsys.readouterr().out


def test_list_sizes_exact_when_small_power_of_ten_when_huge(capsys):
    rc, out, _ = run(capsys, "list")
    sizes = {ln.split()[0]: ln.split()[1] for ln in out.strip().splitlines()}
    assert rc == 0 and sizes["nb201"] == "15,625" and sizes["vit"] == "~10^10.7"
