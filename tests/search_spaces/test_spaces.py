"""Every registered space, on every input shape the data-set registry knows: build, round trip,
seeded determinism, mutation, Optuna samplers and bad input. A new space is tested for free."""

from __future__ import annotations

import math
import random

import optuna
import pytest
import torch
import torch.nn.functional as F

from hwnas.common.errors import ConfigError
from hwnas.common.threads import torch_threads
from search_spaces import ArchError, get_space, list_spaces
from search_spaces.stats import count_params_macs, reference_stats

SPACES = list_spaces()
BASE_SHAPES = [(1, 28, 28), (1, 8, 8), (3, 32, 32)]


def _data_shapes() -> list[tuple[int, int, int]]:
    from hwnas.train.datasets import get_dataset, list_datasets

    return [tuple(get_dataset(n).shape) for n in list_datasets()]


SHAPES = sorted(set(BASE_SHAPES) | set(_data_shapes()))
optuna.logging.set_verbosity(optuna.logging.WARNING)


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    # Small models on a shared 2-core machine: threads only add contention.
    with torch_threads(1):
        yield


def _archs(name: str, n: int, seed: int = 0) -> list[str]:
    space, rng = get_space(name), random.Random(seed)
    return [space.random_arch(rng) for _ in range(n)]


def test_registry_has_the_four_spaces():
    assert {"mbconv", "vit", "resnet", "nb201"} <= set(SPACES)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("name", SPACES)
def test_build_forward_backward_finite(name, shape):
    space = get_space(name)
    arch = _archs(name, 1, seed=len(name))[0]
    torch.manual_seed(0)
    model = space.build(arch, in_chans=shape[0], num_classes=10, img_size=shape[1])
    x = torch.randn(2, *shape)
    logits = model(x)
    assert logits.shape == (2, 10)
    loss = F.cross_entropy(logits, torch.tensor([0, 1]))
    loss.backward()
    assert torch.isfinite(loss)
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert grads and all(g is not None and torch.isfinite(g).all() for g in grads)


@pytest.mark.parametrize("name", SPACES)
def test_many_archs_fit_odd_sizes(name):
    # Every sampled arch must fit odd sides too (strided convs and pooled shortcuts must round
    # alike) and sides above the stem threshold (33 px).
    space = get_space(name)
    for img in (9, 13, 33):
        for arch in _archs(name, 4, seed=img):
            model = space.build(arch, in_chans=3, num_classes=7, img_size=img).eval()
            with torch.no_grad():
                assert model(torch.zeros(1, 3, img, img)).shape == (1, 7)


@pytest.mark.parametrize("name", SPACES)
def test_encode_decode_round_trip(name):
    space = get_space(name)
    archs = _archs(name, 50)
    for arch in archs:
        assert space.encode(space.decode(arch)) == arch
        assert space.validate(arch) == arch
    assert len(set(archs)) > 1


@pytest.mark.parametrize("name", SPACES)
def test_optuna_params_rebuild_the_arch(name):
    # A spec is the trial's params, so a finished trial names its arch without user attrs.
    space = get_space(name)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=3))
    for _ in range(10):
        trial = study.ask()
        arch = space.sample(trial)
        assert space.encode(trial.params) == arch
        study.tell(trial, 0.0)
    assert space.encode(study.trials[3].params) == space.encode(space.decode(
        space.encode(study.trials[3].params)))


def _optuna_sequence(name: str, seed: int, n: int = 8) -> list[str]:
    space = get_space(name)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
    out = []
    for _ in range(n):
        trial = study.ask()
        out.append(space.sample(trial))
        study.tell(trial, 0.0)
    return out


@pytest.mark.parametrize("name", SPACES)
def test_same_seed_same_archs(name):
    assert _optuna_sequence(name, 7) == _optuna_sequence(name, 7)
    assert _optuna_sequence(name, 7) != _optuna_sequence(name, 8)
    assert _archs(name, 10, seed=5) == _archs(name, 10, seed=5)
    assert _archs(name, 10, seed=5) != _archs(name, 10, seed=6)


@pytest.mark.parametrize("name", SPACES)
def test_same_seed_same_first_batch_loss(name):
    space = get_space(name)
    arch = _archs(name, 1, seed=11)[0]
    x = torch.randn(4, 1, 28, 28, generator=torch.Generator().manual_seed(0))
    y = torch.tensor([0, 1, 2, 3])

    def first_loss(seed: int) -> float:
        torch.manual_seed(seed)
        model = space.build(arch, in_chans=1, num_classes=10, img_size=28)
        return F.cross_entropy(model(x), y).item()

    assert first_loss(0) == first_loss(0)
    assert first_loss(0) != first_loss(1)


@pytest.mark.parametrize("name", SPACES)
def test_mutate_changes_one_choice(name):
    space, rng = get_space(name), random.Random(0)
    for arch in _archs(name, 30):
        child = space.mutate(arch, rng)
        assert child != arch
        assert space.validate(child) == child
        a, b = space.decode(arch), space.decode(child)
        changed = {k for k in a.keys() & b.keys() if a[k] != b[k]}
        if a.keys() == b.keys():
            assert len(changed) == 1, (arch, child)
        else:  # a group or block was added or dropped: only the count and that part differ
            assert changed <= {"groups", "depth"}


def test_sizes():
    assert get_space("nb201").size() == 5**6 == 15_625
    from search_spaces import vit as vit_space

    per_block = len(vit_space.HEADS) * len(vit_space.MLPS)  # heads and MLP ratio per block
    expected = 3 * 4 * sum(per_block**d for d in range(2, 9))
    assert get_space("vit").size() == expected > 10**10
    from search_spaces import resnet

    per_group = [3 * 3 * len(w) for w in resnet.WIDTHS]
    expected = len(resnet.STEMS) * sum(math.prod(per_group[:g]) for g in range(1, 5))
    assert get_space("resnet").size() == expected


@pytest.mark.parametrize("name", ["nb201"])  # vit is per-block (5.5e10 archs): see test_sizes
def test_size_matches_enumeration(name):
    # Small spaces: every table combination encodes to a distinct valid string.
    import itertools

    space = get_space(name)
    keys = list(space.table)
    archs = {space.encode(dict(zip(keys, vals, strict=True)))
             for vals in itertools.product(*space.table.values())}
    assert len(archs) == space.size()
    for arch in random.Random(0).sample(sorted(archs), 50):
        space.decode(arch)


@pytest.mark.parametrize("sampler", ["tpe", "nsga2", "gp"])
@pytest.mark.parametrize("name", SPACES)
def test_optuna_samplers(name, sampler):
    space = get_space(name)
    make = {"tpe": lambda: optuna.samplers.TPESampler(seed=0, n_startup_trials=3),
            "nsga2": lambda: optuna.samplers.NSGAIISampler(seed=0, population_size=4),
            "gp": lambda: optuna.samplers.GPSampler(seed=0, n_startup_trials=2)}[sampler]
    directions = ["minimize", "maximize"] if sampler == "nsga2" else ["minimize"]
    study = optuna.create_study(sampler=make(), directions=directions)

    def objective(trial):
        arch = space.sample(trial)
        trial.set_user_attr("arch", arch)
        feats = len(arch), sum(map(ord, arch)) % 97
        return feats if len(directions) == 2 else feats[0]

    study.optimize(objective, n_trials=4 if sampler == "gp" else 10)
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(done) == len(study.trials)
    for t in done:
        assert space.validate(t.user_attrs["arch"]) == space.encode(t.params)


@pytest.mark.slow
def test_ray_tune_optuna_search():
    from ray.tune.search.optuna import OptunaSearch

    for name in SPACES:
        space, archs = get_space(name), []
        searcher = OptunaSearch(space=lambda t, s=space, a=archs: a.append(s.sample(t)),
                                metric="acc", mode="max", seed=0)
        for i in range(3):
            config = searcher.suggest(f"t{i}")
            assert space.encode(config) == archs[-1]
            searcher.on_trial_complete(f"t{i}", {"acc": 0.1 * i})


@pytest.mark.parametrize("name", SPACES)
def test_features_numeric_with_stable_keys(name):
    space = get_space(name)
    archs = _archs(name, 3)
    feats = [space.features(a) for a in archs]
    assert all(f.keys() == feats[0].keys() for f in feats)
    for arch, f in zip(archs, feats, strict=True):
        assert all(isinstance(v, float) and math.isfinite(v) for v in f.values())
        assert f["params"] > 0 and f["macs"] > 0
        assert (f["params"], f["macs"]) == tuple(map(float, reference_stats(space, arch)))


@pytest.mark.parametrize("name", SPACES)
def test_meta_stats_equal_real_stats(name):
    space = get_space(name)
    arch = _archs(name, 1, seed=2)[0]
    real = space.build(arch, in_chans=1, num_classes=10, img_size=28)
    assert count_params_macs(real, (1, 28, 28)) == reference_stats(space, arch, (1, 28, 28))


def test_unknown_space_names_the_known_ones():
    with pytest.raises(ConfigError, match="must be one of .*resnet.*Fix"):
        get_space("resnet50")


BAD_ARCHS = {
    "mbconv": ["", "mb:hs", "mbconv:hs-s16-k3e1c16d1-k5e4c24d2-k3e3c40d2-k5e6c64d3-k7e6c96d2",
               "mb:xx-s16-k3e1c16d1-k5e4c24d2-k3e3c40d2-k5e6c64d3-k7e6c96d2",
               "mb:hs-s16-k4e1c16d1-k5e4c24d2-k3e3c40d2-k5e6c64d3-k7e6c96d2",
               "mb:hs-s016-k3e1c16d1-k5e4c24d2-k3e3c40d2-k5e6c64d3-k7e6c96d2",
               "mb:hs-s16-k3e1c16d1-k5e4c24d2-k3e3c40d2-k5e6c64d3-k7e6c96d2SE"],
    "resnet": ["rn:", "rn:s32", "rn:s32-d2r1c32-d2r1c32-d2r1c64-d2r1c96-d1r1c96",
               "rn:s33-d2r1c32", "rn:s32-d0r1c32", "rn:s32-d2r1c64", "rn:s32-d2r1", "s32-d2r1c32"],
    "vit": ["vit:", "vit:p3-e64-d2-h4-m2", "vit:p4-e64-d9-h4-m2", "vit:p4-e64-d2-h4",
            "vit:p04-e64-d2-h4-m2", "vit:p4-e64-d2-h5-m2", "vit:p4-e64-h4m2",
            "vit:p4-e64-h4m2-h4m2", "vit:p4-e64-h4m2-h3m2", "vit:p4-e64-h4m2-hm2"],
    "nb201": ["|conv~0|+|none~0|none~1|+|none~0|none~1|none~2|",
              "|none~0|+|none~0|none~1|", "none~0+none~0|none~1+none~0|none~1|none~2",
              "|none~1|+|none~0|none~1|+|none~0|none~1|none~2|",
              "|none~0|+|none~0|none~1|+|none~0|none~2|none~1|",
              "|none~00|+|none~0|none~1|+|none~0|none~1|none~2|"],
}


@pytest.mark.parametrize("name", SPACES)
def test_malformed_arch_names_rule_value_and_grammar(name):
    space = get_space(name)
    bad = BAD_ARCHS.get(name, ["?", ""]) + ["?", 42]
    first_line = space.grammar().splitlines()[0]
    for arch in bad:
        with pytest.raises(ArchError) as err:
            space.decode(arch)
        text = str(err.value)
        assert repr(str(arch)) in text or repr(arch) in text
        assert first_line in text and "Fix:" in text
        with pytest.raises(ArchError):
            space.build(arch, in_chans=1, num_classes=10, img_size=28)


@pytest.mark.parametrize("name", SPACES)
def test_bad_build_arguments_all_reported(name):
    space = get_space(name)
    arch = _archs(name, 1)[0]
    with pytest.raises(ConfigError) as err:
        space.build(arch, in_chans=0, num_classes=1, img_size=4)
    assert len(err.value.problems) == 3
    text = str(err.value)
    assert "in_chans" in text and "num_classes" in text and "img_size" in text


@pytest.mark.parametrize("name", SPACES)
def test_wrong_channel_count_is_named(name):
    model = get_space(name).build(_archs(name, 1)[0], in_chans=1, num_classes=10, img_size=28)
    with pytest.raises(RuntimeError, match="channels"):
        model(torch.zeros(2, 3, 28, 28))


@pytest.mark.parametrize("name", SPACES)
def test_state_dict_moves_to_a_fresh_build(name):
    # The checkpoint format stores (space, arch, state_dict) and rebuilds the model from them.
    space = get_space(name)
    arch = _archs(name, 1, seed=9)[0]
    torch.manual_seed(0)
    a = space.build(arch, in_chans=1, num_classes=10, img_size=28).eval()
    torch.manual_seed(1)
    b = space.build(arch, in_chans=1, num_classes=10, img_size=28).eval()
    b.load_state_dict(a.state_dict())
    x = torch.randn(2, 1, 28, 28)
    assert torch.equal(a(x), b(x))


@pytest.mark.parametrize("name", ["resnet", "nb201"])
def test_analog_friendly_spaces_have_only_dense_convs(name):
    # aihwkit maps only dense layers: every conv of these spaces must have groups == 1.
    space = get_space(name)
    for arch in _archs(name, 10):
        model = space.build(arch, in_chans=3, num_classes=10, img_size=32)
        convs = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
        assert convs and all(c.groups == 1 for c in convs)


def test_padded_vit_exports_with_a_dynamic_batch():
    # 28 px with 8 px patches is padded inside the patch embedding to a fixed 32 px grid, so
    # torch.export (the quantization path) sees no position-embedding resampling.
    model = get_space("vit").build("vit:p8-e64-d2-h2-m1", in_chans=1, num_classes=10,
                                   img_size=28).eval()
    x = torch.randn(3, 1, 28, 28)
    batch = torch.export.Dim("batch", min=1, max=64)
    program = torch.export.export(model, (x,), dynamic_shapes=({0: batch},))
    targets = [str(n.target) for n in program.graph.nodes]
    assert any("constant_pad" in t or "pad" in t for t in targets)
    assert not any("upsample" in t or "interpolate" in t for t in targets)
    assert torch.allclose(program.module()(x), model(x), atol=1e-5)
    assert program.module()(x[:1]).shape == (1, 10)


@pytest.mark.parametrize("name", SPACES)
def test_example_is_valid_and_documented(name):
    space = get_space(name)
    assert space.validate(space.example) == space.example
    assert space.example in "".join(space.grammar().split())


@pytest.mark.gpu
@pytest.mark.parametrize("name", SPACES)
def test_cuda_channels_last_autocast_step(name):
    # The training loop's CUDA path: channels_last memory format and bf16 autocast.
    space = get_space(name)
    model = space.build(space.example, in_chans=3, num_classes=10, img_size=32).cuda()
    model = model.to(memory_format=torch.channels_last)
    x = torch.randn(8, 3, 32, 32, device="cuda").to(memory_format=torch.channels_last)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = F.cross_entropy(model(x), torch.arange(8, device="cuda") % 10)
    loss.backward()
    assert torch.isfinite(loss)
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_vit_blocks_have_their_own_heads_and_mlp_at_fixed_head_width():
    from search_spaces.vit import HEAD_DIM

    space = get_space("vit")
    arch = "vit:p4-e128-h4m2-h8m3-h2m1"
    assert space.encode(space.decode(arch)) == arch
    model = space.build(arch, in_chans=1, num_classes=10, img_size=28)
    qkv = [b.attn.qkv.weight.shape for b in model.blocks]
    fc1 = [b.mlp.fc1.weight.shape[0] for b in model.blocks]
    assert qkv == [(3 * HEAD_DIM * h, 128) for h in (4, 8, 2)]  # q/k/v width follows heads
    assert fc1 == [128 * m for m in (2, 3, 1)]
    # every block the same: only the uniform spelling is canonical
    assert space.encode(space.decode("vit:p4-e64-d2-h4-m2")) == "vit:p4-e64-d2-h4-m2"
    with pytest.raises(ArchError, match="not canonical"):
        space.decode("vit:p4-e64-h4m2-h4m2")
