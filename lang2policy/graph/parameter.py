"""One node parameter: its name, default, kind and one-line description (a row of the table in
``lang2policy.graph.parameters``), and the check of a value against it. Pure: no ROS import.

A kind says how the node declares it and what a value must be:

* ``text``, ``flag``, ``integer``, ``names`` (a string list): declared with the type of the
  default, so ROS itself refuses another type;
* ``number``: any int or float, > 0 (``zero``: >= 0; ``whole``: an integer value);
* ``finite``: any finite int or float;
* ``switch``: text or a boolean (a bare ``on``/``off`` on the command line is YAML for
  true/false);
* ``any``: any type (the node reads it itself).

A row whose default is None has a default the node computes (``computed`` says what), the
only case where a node passes a default of its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from lang2policy.errors import ConfigError

Value = bool | int | float | str | tuple[str, ...] | None
STATIC = ("text", "flag", "integer", "names")  # declared with the type of the default
DYNAMIC = ("number", "finite", "switch", "any")  # declared with dynamic typing
_TYPES = {"text": str, "flag": bool, "integer": int, "names": tuple}


@dataclass(frozen=True)
class Parameter:
    """One node parameter (see the module docstring)."""

    name: str
    default: Value
    help: str
    kind: str = "text"
    zero: bool = False  # number: 0 allowed
    whole: bool = False  # number: an integer value
    computed: str = ""  # default None: what the node computes instead

    def __post_init__(self) -> None:
        if self.kind not in STATIC + DYNAMIC:
            raise ValueError(f"{self.name}: unknown kind {self.kind!r}")
        if self.default is None:
            if not self.computed:
                raise ValueError(f"{self.name}: a default of None needs `computed`")
        elif self.kind in STATIC and not isinstance(self.default, _TYPES[self.kind]):
            raise ValueError(f"{self.name}: default {self.default!r} is not {self.kind}")
        elif self.kind in ("number", "finite"):
            self.check(self.default)

    @property
    def dynamic(self) -> bool:
        """Declared with ROS's dynamic typing (any type reaches ``check``)."""
        return self.kind in DYNAMIC

    def declared(self, computed: Value = None) -> object:
        """The default a node declares: the row's, or ``computed`` for a computed row
        (tuples as lists: ROS's string arrays)."""
        if self.default is None and computed is None:
            raise ConfigError(f"parameter '{self.name}': the node must compute its default")
        if self.default is not None and computed is not None:
            raise ConfigError(f"parameter '{self.name}' has a default in the table")
        value = self.default if computed is None else computed
        return list(value) if isinstance(value, tuple) else value

    def check(self, value: object) -> object:
        """``value`` as the node reads it (numbers as float); ConfigError when it is not one
        this parameter takes."""
        if self.kind == "finite":
            if not _is_number(value) or not math.isfinite(value):  # type: ignore[arg-type]
                raise ConfigError(f"parameter '{self.name}' must be a finite number, got {value!r}")
            return float(value)  # type: ignore[arg-type]
        if self.kind != "number":
            return value
        ok = _is_number(value) and (value >= 0 if self.zero else value > 0)  # type: ignore[operator]
        if not ok or (self.whole and value != int(value)):  # type: ignore[call-overload]
            what = "an integer" if self.whole else "a number"
            raise ConfigError(
                f"parameter '{self.name}' must be {what} {'>= 0' if self.zero else '> 0'}, "
                f"got {value!r}"
            )
        return float(value)  # type: ignore[arg-type]

    def accepts(self, value: object) -> bool:
        """Whether a params file's ``value`` has a type the node takes."""
        if self.kind in ("number", "finite"):
            return _is_number(value)
        if self.kind == "switch":
            return isinstance(value, str | bool)
        if self.kind == "names":
            return isinstance(value, list) and all(isinstance(v, str) for v in value)
        if self.kind == "any":
            return True
        wanted = _TYPES[self.kind]
        return isinstance(value, wanted) and not (wanted is int and isinstance(value, bool))

    def type_text(self) -> str:
        """The kind for a person: ``number >= 0``, ``string list`` ..."""
        if self.kind == "number":
            return f"{'integer' if self.whole else 'number'} {'>= 0' if self.zero else '> 0'}"
        return {
            "text": "string",
            "flag": "bool",
            "integer": "integer",
            "names": "string list",
            "finite": "number",
            "switch": "string or bool",
            "any": "any",
        }[self.kind]

    def default_text(self) -> str:
        """The default as a params file would write it (or what the node computes)."""
        if self.default is None:
            return f"({self.computed})"
        if isinstance(self.default, bool):
            return "true" if self.default else "false"
        if isinstance(self.default, tuple):
            return "[" + ", ".join(self.default) + "]"
        if self.default == "":
            return '""'
        return str(self.default)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def text(name: str, default: str | None, help: str, computed: str = "") -> Parameter:
    return Parameter(name, default, help, "text", computed=computed)


def flag(name: str, default: bool | None, help: str, computed: str = "") -> Parameter:
    return Parameter(name, default, help, "flag", computed=computed)


def number(
    name: str, default: float | None, help: str, zero=False, whole=False, computed=""
) -> Parameter:
    return Parameter(name, default, help, "number", zero, whole, computed)


def switch(name: str, default: str | bool, help: str) -> Parameter:
    return Parameter(name, default, help, "switch")
