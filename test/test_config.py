"""Config loading fails loudly on unknown keys, missing keys and wrong types."""

from dataclasses import dataclass

import pytest

from lang2policy.config import load_dataclass, read_yaml
from lang2policy.errors import ConfigError
from lang2policy.scene.layout import LayoutConfig, load_layout


@dataclass(frozen=True)
class Inner:
    gain: float


@dataclass(frozen=True)
class Outer:
    name: str
    inner: Inner
    limits: tuple[float, float] = (0.0, 1.0)


def test_good_mapping_builds_nested_dataclasses():
    cfg = load_dataclass(Outer, {"name": "x", "inner": {"gain": 2}, "limits": [1, 2]}, "t")
    assert cfg == Outer("x", Inner(2.0), (1.0, 2.0))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"name": "x", "inner": {"gain": 1}, "limitz": [0, 1]}, "unknown key.*limitz.*valid keys"),
        ({"inner": {"gain": 1}}, "missing required key 'name'"),
        ({"name": "x", "inner": {"gain": "high"}}, r"t\.inner\.gain: expected a number"),
        ({"name": "x", "inner": {"gain": 1}, "limits": [1]}, "expected 2 values"),
        ({"name": 3, "inner": {"gain": 1}}, "expected a string"),
    ],
)
def test_bad_mappings_name_the_problem(data, message):
    with pytest.raises(ConfigError, match=message):
        load_dataclass(Outer, data, "t")


def test_yaml_errors_name_the_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1, 2\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml"):
        read_yaml(bad)
    with pytest.raises(ConfigError, match="not found"):
        read_yaml(tmp_path / "missing.yaml")


def test_layout_validation():
    with pytest.raises(ConfigError, match="unknown colours"):
        LayoutConfig("l", ["red", "mauve"], (1, 1), (1, 1), 0.01, 0.1)
    with pytest.raises(ConfigError, match="blocks range"):
        LayoutConfig("l", ["red"], (1, 3), (1, 1), 0.01, 0.1)
    with pytest.raises(ConfigError, match="available layouts"):
        load_layout("nope")
