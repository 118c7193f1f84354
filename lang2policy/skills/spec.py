"""Typed skill definitions: one place that says what each robot API call takes and returns.

The same ``Skill`` objects validate intents in the host (``bind``), give the sandbox child its
function stubs, and generate the API section of the LLM prompt (``signature`` + ``doc``).
Arguments are plain JSON data; ``bind`` fills defaults so that the privilege policy always sees
the complete argument set (Progent's omitted-argument lesson).

``bind`` is total over anything JSON can carry: a value nested deeper than ``MAX_NESTING``
lists, an integer too large for a float (``10**400``), a string with control characters or line
breaks are all an ``InvalidIntentError`` that says what was wrong and what is allowed; no other
exception (OverflowError, RecursionError) leaves it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from lang2policy.errors import InvalidIntentError
from lang2policy.text_quote import escape_char

REQUIRED = object()  # default of a parameter that must be given
KINDS = ("number", "integer", "string", "boolean", "point", "object", "place")
CATEGORIES = ("query", "motion", "speech")
RETURNS = ("none", "bool", "names", "point", "bbox", "pose", "bounds")
MAX_COORDINATE = 10.0  # metres; anything larger is a unit or sign error, not a target
MAX_NAME = 64
MAX_NESTING = 4  # levels of lists/objects in one argument (a point is 1); deeper is refused
_FINITE = "numbers must be finite, of magnitude below 1.8e308"

_PYTHON_TYPES = {
    "number": "float",
    "integer": "int",
    "string": "str",
    "boolean": "bool",
    "point": "np.ndarray",
    "object": "str",
    "place": "str | np.ndarray",
}
_RETURN_TYPES = {
    "none": "None",
    "bool": "bool",
    "names": "list[str]",
    "point": "np.ndarray",
    "bbox": "np.ndarray",
    "pose": "dict[str, np.ndarray]",
    "bounds": "np.ndarray",
}


def _show(value: object) -> str:
    """A short repr for error messages; never raises (nesting is bounded before it is called)."""
    try:
        text = repr(value)
    except (ValueError, RecursionError):  # an int past Python's digit limit for str()
        text = f"<{type(value).__name__} too large to show>"
    return text if len(text) <= 80 else text[:77] + "..."


def _finite_float(value: object) -> float | None:
    """``value`` as a finite float, or None when it is not a number (bools are not) or is
    infinite, NaN or too large for a float (an int like ``10**400``)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def nesting_depth(value: object, limit: int = MAX_NESTING) -> int:
    """Levels of lists, tuples and dicts in ``value`` (a point is 1, a number 0), counted level
    by level without recursion and only up to ``limit + 1``: cheap and safe on hostile input."""
    depth, level = 0, [value]
    while depth <= limit:
        containers = [item for item in level if isinstance(item, dict | list | tuple)]
        if not containers:
            return depth
        depth += 1
        level = [
            inner
            for box in containers
            for inner in (box.values() if isinstance(box, dict) else box)
        ]
    return depth


@dataclass(frozen=True)
class Param:
    name: str
    kind: str
    doc: str
    default: object = REQUIRED
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] | None = None
    max_length: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"parameter {self.name}: kind {self.kind!r} is not one of {KINDS}")

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    def allowed(self) -> str:
        """What values are allowed, for error messages and the prompt."""
        if self.kind in ("number", "integer"):
            word = "a number" if self.kind == "number" else "an integer"
            low = "" if self.minimum is None else f" >= {self.minimum:g}"
            high = "" if self.maximum is None else f" <= {self.maximum:g}"
            return word + (low + (" and" if low and high else "") + high)
        if self.kind == "string":
            if self.choices:
                return "one of " + ", ".join(repr(c) for c in self.choices)
            return f"a string of at most {self.max_length or MAX_NAME} characters"
        if self.kind == "boolean":
            return "True or False"
        point = f"a point [x, y, z] of 3 finite numbers in metres (|v| <= {MAX_COORDINATE:g})"
        if self.kind == "point":
            return point
        if self.kind == "object":
            return "the name of an object on the table (a string)"
        return f"an object name or {point}"

    def check(self, value: object) -> object:
        """The value as plain JSON data, or raise ValueError saying what is wrong."""
        kind = self.kind
        if kind in ("number", "integer"):
            return self._check_number(value)
        if kind == "boolean":
            if not isinstance(value, bool):
                raise ValueError(f"{_show(value)} is not True or False")
            return value
        if kind in ("string", "object") or (kind == "place" and isinstance(value, str)):
            return self._check_string(value)
        return _check_point(value)

    def _check_number(self, value: object) -> float | int:
        kind = self.kind
        number = _finite_float(value)
        if number is None or (kind == "integer" and not isinstance(value, int)):
            wanted = "a finite number" if kind == "number" else "an integer"
            if isinstance(value, int) and not isinstance(value, bool) and number is None:
                raise ValueError(f"{_show(value)} is too large: {_FINITE}")
            raise ValueError(f"{_show(value)} is not {wanted}")
        if (self.minimum is not None and number < self.minimum) or (
            self.maximum is not None and number > self.maximum
        ):
            raise ValueError(f"{number:g} is out of range")
        return number if kind == "number" else int(value)

    def _check_string(self, value: object) -> str:
        if not isinstance(value, str):
            raise ValueError(f"{_show(value)} is not a string")
        limit = self.max_length or MAX_NAME
        if len(value) > limit:
            raise ValueError(f"a string of {len(value)} characters is too long")
        if not value.isprintable():
            index, char = next((i, c) for i, c in enumerate(value) if not c.isprintable())
            raise ValueError(
                f"the string has a control character or line break ({escape_char(char)}) at "
                f"position {index}; strings must be printable text on one line"
            )
        if self.kind == "object" and not value.strip():
            raise ValueError("an empty object name")
        if self.choices and value not in self.choices:
            raise ValueError(f"{_show(value)} is not a known choice")
        return value


def _check_point(value: object) -> list[float]:
    if not isinstance(value, list | tuple) or len(value) != 3:
        raise ValueError(f"{_show(value)} is not a list of 3 numbers")
    numbers = [_finite_float(v) for v in value]
    if any(v is None for v in numbers):
        raise ValueError(f"{_show(value)} has a value that is not a finite number ({_FINITE})")
    point = [float(v) for v in numbers]
    if max(abs(v) for v in point) > MAX_COORDINATE:
        raise ValueError(f"{_show(point)} is more than {MAX_COORDINATE:g} m from the origin")
    return point


@dataclass(frozen=True)
class Skill:
    name: str
    category: str
    params: tuple[Param, ...]
    returns: str
    doc: str

    def __post_init__(self) -> None:
        if self.category not in CATEGORIES or self.returns not in RETURNS:
            raise ValueError(f"skill {self.name}: bad category or return kind")

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)

    def bind(self, args: dict) -> dict:
        """Validate ``args`` and fill defaults: the complete argument set, as plain data."""
        if not isinstance(args, dict):
            raise InvalidIntentError(f"{self.name}(): arguments must be named values")
        known = ", ".join(p.name for p in self.params) or "none"
        for name in args:
            if self.param(str(name)) is None:
                raise InvalidIntentError(
                    f"{self.name}({str(name)[:40]}=...): unknown argument; allowed: {known}"
                )
        bound = {}
        for param in self.params:
            if param.name not in args:
                if param.required:
                    raise InvalidIntentError(
                        f"{self.name}({param.name}=...): missing; allowed: {param.allowed()}"
                    )
                bound[param.name] = param.default
                continue
            value = args[param.name]
            if nesting_depth(value) > MAX_NESTING:
                raise InvalidIntentError(
                    f"{self.name}({param.name}=...): the value nests lists more than "
                    f"{MAX_NESTING} levels deep; allowed: {param.allowed()}"
                )
            try:
                bound[param.name] = param.check(value)
            except ValueError as exc:
                raise InvalidIntentError(
                    f"{self.name}({param.name}={_show(args[param.name])}): {exc}; "
                    f"allowed: {param.allowed()}"
                ) from None
        return bound

    def args_schema(self) -> dict:
        """JSON Schema of the arguments object (for documentation and external tools)."""
        return {
            "type": "object",
            "additionalProperties": False,
            "required": [p.name for p in self.params if p.required],
            "properties": {p.name: _param_schema(p) for p in self.params},
        }

    def object_args(self, bound: dict) -> list[str]:
        """Object names this call refers to (object params, and place params given a name)."""
        return [
            bound[p.name]
            for p in self.params
            if p.kind in ("object", "place") and isinstance(bound.get(p.name), str)
        ]

    def signature(self) -> str:
        parts = []
        for p in self.params:
            text = f"{p.name}: {_PYTHON_TYPES[p.kind]}"
            parts.append(text if p.required else f"{text} = {p.default!r}")
        return f"{self.name}({', '.join(parts)}) -> {_RETURN_TYPES[self.returns]}"


def _param_schema(param: Param) -> dict:
    point = {
        "type": "array",
        "items": {"type": "number", "minimum": -MAX_COORDINATE, "maximum": MAX_COORDINATE},
        "minItems": 3,
        "maxItems": 3,
    }
    if param.kind in ("number", "integer"):
        schema: dict = {"type": param.kind}
        if param.minimum is not None:
            schema["minimum"] = param.minimum
        if param.maximum is not None:
            schema["maximum"] = param.maximum
        return schema
    if param.kind == "point":
        return point
    string = {"type": "string", "maxLength": param.max_length or MAX_NAME}
    if param.choices:
        string["enum"] = list(param.choices)
    if param.kind == "place":
        return {"anyOf": [string, point]}
    return {"type": "boolean"} if param.kind == "boolean" else string
