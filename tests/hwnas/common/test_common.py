import pytest

from hwnas.common.errors import ConfigError, Problem
from hwnas.common.provenance import provenance, versions
from hwnas.common.registry import Registry


def test_registry_register_get_list():
    reg: Registry[int] = Registry("widget")
    reg.register("alpha")(1)
    reg.register("beta")(2)
    assert reg.get("beta") == 2
    assert reg.list("a*") == ["alpha"]
    assert "alpha" in reg and len(reg) == 2


def test_registry_unknown_name_lists_known():
    reg: Registry[int] = Registry("widget")
    reg.register("alpha")(1)
    with pytest.raises(ConfigError, match=r"alpha.*'gamma'"):
        reg.get("gamma")


def test_registry_duplicate_is_an_error_unless_replaced():
    reg: Registry[int] = Registry("widget")
    reg.register("a")(1)
    with pytest.raises(ConfigError, match="registered once.*already registered by"):
        reg.register("a")(2)
    assert reg.get("a") == 1  # the first entry is kept
    reg.register("a", replace=True)(2)
    assert reg.get("a") == 2


def test_config_error_reports_every_problem():
    err = ConfigError([Problem("x", "must be > 0", -1, "use 1"), Problem("y", "unknown", "z", "w")])
    text = str(err)
    assert "2 problem(s)" in text and "got -1" in text and "Fix: w" in text
    assert len(err.problems) == 2


def test_provenance_has_versions_and_device():
    prov = provenance("cpu", seed=3)
    assert prov["versions"]["torch"].startswith("2.13")
    assert prov["seed"] == 3 and "threads" in prov["device"]
    assert versions()["python"].startswith("3.11")
