"""Typed configuration loaded from YAML: the single source of truth for robots and layouts.

Every config is a frozen dataclass. ``load_dataclass`` builds one from a mapping and fails loudly
on unknown keys, missing keys and wrong types, naming the file and the key path, so a mistyped
key never silently falls back to a default.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

from lang2policy.errors import ConfigError
from lang2policy.yaml_strict import one_line, read_yaml_file

T = TypeVar("T")


def read_yaml(path: Path) -> dict[str, Any]:
    """Read a YAML mapping strictly (``yaml_strict``): any bad file is a one-line ConfigError.

    Duplicate keys, anchors/aliases, non-core tags, files over 1 MiB, deep nesting and huge
    scalars are refused; every error names the file and, where there is one, the key path.
    """
    data = read_yaml_file(path)
    if not isinstance(data, dict):
        raise ConfigError(
            one_line(
                f"{path}: expected a mapping at the top level, got {type(data).__name__}; "
                "allowed: a YAML mapping of key: value lines"
            )
        )
    return data


def load_dataclass(cls: type[T], data: Any, where: str) -> T:
    """Build dataclass ``cls`` from ``data``; ``where`` names the source in error messages."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(data).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; valid keys: {sorted(fields)}")
    hints = typing.get_type_hints(cls)
    values = {}
    for name, field in fields.items():
        if name in data:
            values[name] = _convert(hints[name], data[name], f"{where}.{name}")
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{where}: missing required key '{name}'")
    return cls(**values)


def _convert(hint: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if dataclasses.is_dataclass(hint):
        return load_dataclass(hint, value, where)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _convert(inner[0], value, where)
    if origin is tuple:
        return _convert_tuple(args, value, where)
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        key_t, val_t = args
        return {
            _convert(key_t, k, where): _convert(val_t, v, f"{where}.{k}") for k, v in value.items()
        }
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        return [_convert(args[0], v, f"{where}[{i}]") for i, v in enumerate(value)]
    return _convert_scalar(hint, value, where)


def _convert_tuple(args: tuple, value: Any, where: str) -> tuple:
    if not isinstance(value, list | tuple):
        raise ConfigError(f"{where}: expected a list, got {value!r}")
    if len(args) == 2 and args[1] is Ellipsis:
        return tuple(_convert(args[0], v, where) for v in value)
    if len(value) != len(args):
        raise ConfigError(f"{where}: expected {len(args)} values, got {len(value)}")
    return tuple(_convert(a, v, where) for a, v in zip(args, value, strict=True))


def _convert_scalar(hint: Any, value: Any, where: str) -> Any:
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: expected an integer, got {value!r}")
        return value
    if hint is bool and not isinstance(value, bool):
        raise ConfigError(f"{where}: expected true or false, got {value!r}")
    if hint is str and not isinstance(value, str):
        raise ConfigError(f"{where}: expected a string, got {value!r}")
    return value
