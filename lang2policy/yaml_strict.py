"""A strict, bounded YAML reader for configuration and policy files.

``yaml.safe_load`` is safe from code execution but not from mistakes or hostile files: a repeated
key silently replaces the first (a second ``when:`` dropped a rule's zone condition), an alias
bomb expands into gigabytes, deep nesting or a self-referencing anchor ends in RecursionError,
and a 100000-digit integer raises ValueError. This reader accepts the JSON data model written as
YAML (mappings with scalar keys, lists, strings, numbers, booleans, null) and refuses, with one
line naming the file, the key path and what is allowed:

- duplicate keys (also ``1`` and ``true``, equal as Python keys) and merge keys (``<<``);
- anchors and aliases (``&a`` / ``*a``): no alias bomb and no cyclic data, by construction;
- tags other than the core ones (``!!str``, ``!!int``, ``!!float``, ``!!bool``, ``!!null``,
  ``!!seq``, ``!!map``); dates stay strings, as in JSON;
- files over ``MAX_BYTES``, nesting deeper than ``MAX_DEPTH``, more than ``MAX_NODES`` values,
  scalars over ``MAX_SCALAR_CHARS`` and integers over ``MAX_INT_CHARS`` characters;
- text that is not UTF-8, and paths that are not regular files (a FIFO would block the reader).

Every limit is checked on the parser's event before its node is built, so the cost of reading
any file is bounded by ``MAX_BYTES`` (libyaml parses when PyYAML has it).
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any, ClassVar

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.events import AliasEvent, Event, ScalarEvent
from yaml.nodes import MappingNode, Node, SequenceNode
from yaml.resolver import Resolver

from lang2policy.errors import ConfigError

MAX_BYTES = 1 << 20  # the config files here are a few KiB
MAX_DEPTH = 64  # nested mappings/lists: keeps every later recursive walk far from the limit
MAX_NODES = 100_000  # values (scalars, lists, mappings) in one file
MAX_SCALAR_CHARS = 10_000
MAX_INT_CHARS = 100  # int() refuses more than 4300 digits; no config needs more than a few

_CORE = "tag:yaml.org,2002:"
ALLOWED_TAGS = tuple(_CORE + t for t in ("str", "int", "float", "bool", "null", "seq", "map"))
_MERGE_TAG = _CORE + "merge"
_ALLOWED = (
    "allowed: one UTF-8 YAML document of mappings, lists, strings, numbers, booleans and null"
)
_LINE_BREAKS = str.maketrans(
    {c: ascii(c)[1:-1] for c in "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"}
)
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_$-]{1,60}")


def one_line(text: str) -> str:
    """``text`` with every line break escaped, so it is one line (``str.splitlines`` agrees)."""
    return text.translate(_LINE_BREAKS)


def short(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters: error messages stay short and one line."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def read_yaml_file(path: str | Path) -> Any:
    """The data of the YAML file ``path``; raises ConfigError (one line) for any bad file."""
    source = str(path)
    data = _read_bytes(Path(path), source)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            one_line(f"{source}: not UTF-8 text (invalid byte at offset {exc.start}); {_ALLOWED}")
        ) from exc
    return load_yaml_text(text, source)


def load_yaml_text(text: str, source: str) -> Any:
    """Parse ``text`` strictly; ``source`` names it in errors (see the module docstring)."""
    if len(text) > MAX_BYTES:
        raise ConfigError(
            one_line(f"{source}: {len(text)} characters; allowed: {MAX_BYTES} at most")
        )
    loader: _StrictLoader | None = None
    try:
        loader = _StrictLoader(text, source)  # PyYAML's own reader checks the text here
        return loader.get_single_data()
    except ConfigError:
        raise
    except yaml.YAMLError as exc:
        raise ConfigError(
            one_line(
                f"{source}: not valid YAML{_position(loader, exc)}: {_problem(exc)}; {_ALLOWED}"
            )
        ) from exc
    except (ValueError, TypeError, OverflowError, RecursionError, MemoryError) as exc:
        where = loader.where() if loader is not None else "top level"
        raise ConfigError(
            one_line(
                f"{source}: {where}: cannot be read ({type(exc).__name__}: "
                f"{short(str(exc), 120)}); {_ALLOWED}"
            )
        ) from exc
    finally:
        if loader is not None:
            loader.dispose()


def _read_bytes(path: Path, source: str) -> bytes:
    """At most MAX_BYTES of a regular file; never blocks on a FIFO or device."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError as exc:
        raise ConfigError(one_line(f"config file not found: {source}")) from exc
    except OSError as exc:
        raise ConfigError(one_line(f"{source}: cannot open: {exc.strerror}")) from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(one_line(f"{source}: not a regular file; allowed: a YAML file"))
        if info.st_size > MAX_BYTES:
            raise ConfigError(
                one_line(f"{source}: {info.st_size} bytes; allowed: {MAX_BYTES} bytes at most")
            )
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except OSError as exc:
        raise ConfigError(one_line(f"{source}: cannot read: {exc.strerror}")) from exc
    finally:
        os.close(fd)
    if len(data) > MAX_BYTES:
        raise ConfigError(
            one_line(f"{source}: over {MAX_BYTES} bytes; allowed: {MAX_BYTES} at most")
        )
    return data


def _position(loader: _StrictLoader | None, exc: yaml.YAMLError) -> str:
    """`` at <key path> (line L, column C)``, as much of it as is known."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    return f" at {loader.where()}{at}" if loader is not None and loader.path else at


def _problem(exc: yaml.YAMLError) -> str:
    if isinstance(exc, yaml.MarkedYAMLError):
        return _cut(" ".join(p for p in (exc.context, exc.problem) if p))
    if isinstance(exc, yaml.reader.ReaderError):
        char = exc.character
        shown = ascii(chr(char) if isinstance(char, int) else char)
        return f"unacceptable character {shown} at position {exc.position}"
    return _cut(str(exc))


def _cut(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _JsonResolver(Resolver):
    """YAML 1.1 implicit types without timestamps and ``=``: dates stay strings, as in JSON."""

    yaml_implicit_resolvers: ClassVar[dict] = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag in (*ALLOWED_TAGS, _MERGE_TAG)]
        for first, resolvers in Resolver.yaml_implicit_resolvers.items()
    }


class _StrictComposer(Composer):
    """PyYAML's composer with the limits checked on each event before its node is built."""

    def __init__(self, source: str) -> None:
        Composer.__init__(self)
        self.source = source
        self.path: list[str] = []  # the key path of the node being composed, one part a level
        self.nodes = 0

    def where(self) -> str:
        """The key path, e.g. ``rules[0].when``; a very long one keeps its two ends."""
        text = "".join(self.path).lstrip(".") or "top level"
        return text if len(text) <= 160 else f"{text[:70]}...{text[-70:]}"

    def fail(self, problem: str, event: Event | None = None) -> ConfigError:
        at = ""
        if event is not None and event.start_mark is not None:
            at = f" (line {event.start_mark.line + 1}, column {event.start_mark.column + 1})"
        return ConfigError(one_line(f"{self.source}: {self.where()}{at}: {problem}"))

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        self.path.append(_part(parent, index))
        self._check(self.peek_event(), key=isinstance(parent, MappingNode) and index is None)
        node = super().compose_node(parent, index)
        node.l2p_where = self.where()
        self.path.pop()
        return node

    def _check(self, event: Event, key: bool) -> None:
        if isinstance(event, AliasEvent) or event.anchor is not None:
            name = f"*{event.anchor}" if isinstance(event, AliasEvent) else f"&{event.anchor}"
            raise self.fail(
                f"anchors and aliases ({short(name, 40)}) are not allowed, so that no file can "
                "expand into a huge or cyclic structure; write the value out",
                event,
            )
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise self.fail(f"more than {MAX_NODES} values; allowed: {MAX_NODES} at most", event)
        if len(self.path) - 1 > MAX_DEPTH:
            raise self.fail(f"nested deeper than {MAX_DEPTH} levels; allowed: {MAX_DEPTH}", event)
        tag = event.tag
        if tag not in (None, "!") and tag not in ALLOWED_TAGS:
            raise self.fail(
                f"tag {short(tag, 60)} is not allowed; allowed: no tag or "
                + ", ".join("!!" + t.removeprefix(_CORE) for t in ALLOWED_TAGS),
                event,
            )
        if key and not isinstance(event, ScalarEvent):
            raise self.fail("a mapping key must be a plain scalar (a string or a number)", event)
        if isinstance(event, ScalarEvent) and len(event.value) > MAX_SCALAR_CHARS:
            raise self.fail(
                f"a scalar of {len(event.value)} characters; allowed: {MAX_SCALAR_CHARS} at most",
                event,
            )


def _part(parent: Node | None, index: Any) -> str:
    """One level of a key path: ``.name``, ``['odd key']`` or ``[3]``."""
    if isinstance(parent, SequenceNode):
        return f"[{index}]"
    if isinstance(parent, MappingNode) and index is not None:
        text = index.value if isinstance(index.value, str) else ""
        return f".{text}" if _PLAIN_KEY.fullmatch(text) else f"[{short(text, 40)}]"
    return ""


class _StrictConstructor(SafeConstructor):
    """SafeConstructor for the core tags only; refuses duplicate keys, merges and huge ints."""

    source: str

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict:
        mapping: dict = {}
        lines: dict = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                raise self._fail(node, "merge keys (<<) are not allowed; write the keys out")
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            if key in lines:
                raise self._fail(
                    node,
                    f"duplicate key {short(key, 60)} (lines {lines[key]} and {line}); "
                    "allowed: each key once",
                )
            lines[key] = line
            mapping[key] = self.construct_object(value_node, deep=deep)
        return mapping

    def construct_strict_int(self, node: Node) -> int:
        if len(node.value) > MAX_INT_CHARS:
            raise self._fail(
                node,
                f"an integer of {len(node.value)} characters; allowed: {MAX_INT_CHARS} at most",
            )
        return SafeConstructor.construct_yaml_int(self, node)

    def construct_merge_value(self, node: Node) -> Any:
        raise self._fail(node, "'<<' is a YAML merge key, not a value; quote it for a string")

    def _fail(self, node: Node, problem: str) -> ConfigError:
        where = getattr(node, "l2p_where", "top level")
        at = f" (line {node.start_mark.line + 1})" if node.start_mark is not None else ""
        return ConfigError(one_line(f"{self.source}: {where}{at}: {problem}"))


_StrictConstructor.yaml_constructors = {
    **{tag: SafeConstructor.yaml_constructors[tag] for tag in ALLOWED_TAGS},
    _CORE + "int": _StrictConstructor.construct_strict_int,
    _MERGE_TAG: _StrictConstructor.construct_merge_value,
}
_StrictConstructor.yaml_multi_constructors = {}

try:  # libyaml parses ~20x faster; the composition (and so every check) is PyYAML's either way
    from yaml.cyaml import CParser as _FastParser
except ImportError:  # pragma: no cover - PyYAML without libyaml
    _FastParser = None


if _FastParser is not None:

    class _StrictLoader(_StrictComposer, _FastParser, _StrictConstructor, _JsonResolver):
        def __init__(self, text: str, source: str) -> None:
            _FastParser.__init__(self, text)
            _StrictComposer.__init__(self, source)
            _StrictConstructor.__init__(self)
            _JsonResolver.__init__(self)

else:  # pragma: no cover
    from yaml.parser import Parser
    from yaml.reader import Reader
    from yaml.scanner import Scanner

    class _StrictLoader(  # type: ignore[no-redef]
        _StrictComposer, Reader, Scanner, Parser, _StrictConstructor, _JsonResolver
    ):
        def __init__(self, text: str, source: str) -> None:
            Reader.__init__(self, text)
            Scanner.__init__(self)
            Parser.__init__(self)
            _StrictComposer.__init__(self, source)
            _StrictConstructor.__init__(self)
            _JsonResolver.__init__(self)
