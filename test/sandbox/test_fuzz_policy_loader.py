"""Fuzz the privilege-policy loader (issue 13, finding 2): random text and bytes, YAML-ish token
soup, random deep and huge structures, and mutated valid policies, as files and as dicts.

Whatever comes in, only a Lang2PolicyError (PolicyError / ConfigError) may come out, its
message is one line and names the file (or the dict's source label), and a policy that does load
decides calls and describes itself without raising.
"""

from __future__ import annotations

import copy
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import event, given, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context
from support.fuzz import EXAMPLES, FUZZ

from lang2policy.errors import Lang2PolicyError
from lang2policy.paths import config_dir
from lang2policy.sandbox.policy import Box, PolicyRequest, PrivilegePolicy

WS = Box((0.0, -0.3, 0.0), (0.5, 0.3, 0.4))
DEFAULT = yaml.safe_load((config_dir() / "policies" / "default.yaml").read_text())
REQUESTS = [
    PolicyRequest(
        "move_to", "motion", {"position": [0.2, 0.0, 0.1], "speed": 0.1}, ((0.2, 0, 0.1),)
    ),
    PolicyRequest("pick", "motion", {"obj": "red block", "speed": 0.3}, (), ("red block",)),
    PolicyRequest("say", "speech", {"text": "hi"}),
    PolicyRequest("get_ee_pos", "query", {}),
]


@pytest.fixture(scope="module")
def policy_path():
    with tempfile.TemporaryDirectory(prefix="fuzz-policy-") as folder:
        yield Path(folder) / "fuzzed policy.yaml"


def check_load(path: Path, content: str | bytes) -> None:
    """Write ``content`` to ``path`` and load it: a policy, or a one-line error naming it."""
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_bytes(content.encode("utf-8", "surrogatepass"))
    try:
        policy = PrivilegePolicy.load(path, WS)
    except Lang2PolicyError as exc:
        assert_one_line(exc, str(path))
        note_event(f"file refused: {type(exc).__name__}")
        return
    note_event("file loaded")
    exercise(policy)


def check_dict(data: Any, source: str = "fuzz-source") -> None:
    """Build a policy from ``data`` directly (as plans and benches do)."""
    try:
        policy = PrivilegePolicy.from_dict(data, WS, source)
    except Lang2PolicyError as exc:
        assert_one_line(exc, source)
        note_event(f"dict refused: {type(exc).__name__}")
        return
    note_event("dict loaded")
    exercise(policy)


def note_event(name: str) -> None:
    """Count outcomes for ``--hypothesis-show-statistics`` (only inside a @given test)."""
    if currently_in_test_context():
        event(name)


def assert_one_line(exc: BaseException, name: str) -> None:
    text = str(exc)
    assert len(text.splitlines()) == 1, f"error is not one line: {text!r}"
    assert name in text, f"error does not name {name!r}: {text!r}"
    assert len(text) < 2000, f"error is {len(text)} characters long"


def exercise(policy: PrivilegePolicy) -> None:
    """A loaded policy must decide and describe without raising."""
    for request in REQUESTS:
        decision = policy.decide(request)
        assert isinstance(decision.allowed, bool)
    policy.describe()


# ---------------------------------------------------------------- strategies
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(10**400), max_value=10**400),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(["$ref", "http://127.0.0.1:9/x", "#", "workspace", "*", "motion", "\u2028"]),
)
JSONISH = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(
            st.one_of(st.text(max_size=8), st.sampled_from(list(DEFAULT))), inner, max_size=4
        ),
    ),
    max_leaves=20,
)
TOKENS = st.sampled_from(
    [
        "[", "]", "{", "}", ":", ": ", "- ", ",", "\n", "  ", "'", '"', "#", "---", "...", "? ",
        "&a ", "*a", "&b [*a, *a]", "!!binary ", "!!python/name:os.system ", "!!set ", "<<: ",
        "%YAML 1.1\n", "version: 1\n", "rules:\n", "  - id: r\n", "    skill: pick\n",
        "    effect: allow\n", "    when:\n", "      args:\n", "        speed: ",
        '{"$ref": "#"}', "9" * 5000, "1e999", ".nan", "x" * 20_000, "\x00", "\ufeff", "\x85",
        "2001-13-45", "0x" + "f" * 200, "~", "=", "|\n  a\n", ">\n  b\n", "\t",
    ]
)  # fmt: skip


def deep_text(kind: str, depth: int) -> str:
    if kind == "flow-list":
        return "version: 1\nrules: " + "[" * depth + "]" * depth + "\n"
    if kind == "flow-map":
        return "version: 1\nzones: " + "{a: " * depth + "1" + "}" * depth + "\n"
    if kind == "block":
        return "version: 1\nzones:\n" + "".join(" " * (i + 1) + f"k{i}:\n" for i in range(depth))
    return "version: 1\nrules:\n" + "".join(" " * (2 * i) + "- \n" for i in range(depth))


def deep_value(depth: int, wide: int) -> Any:
    value: Any = 1
    for i in range(depth):
        value = {"a": value} if i % 2 else [value] * wide
    return value


def set_path(data: Any, path: list[Any], value: Any) -> Any:
    """``data`` with the item at ``path`` (indices taken modulo the container) replaced."""
    if not path or not isinstance(data, dict | list) or not data:
        return value
    key = path[0]
    if isinstance(data, dict):
        keys = list(data)
        key = keys[key % len(keys)] if isinstance(key, int) else key
        out = dict(data)
        out[key] = set_path(data.get(key), path[1:], value)
        return out
    index = key % len(data) if isinstance(key, int) else 0
    out_list = list(data)
    out_list[index] = set_path(data[index], path[1:], value)
    return out_list


PLAUSIBLE = st.sampled_from(
    [
        0.2, 1, 100, -1, 0, True, False, None, "workspace", "pick", "*", ["pick", "place"],
        "error", "ask", "allow", "forbid", "motion", {"type": "number", "maximum": 0.2},
        {"enum": ["red block"]}, {"minimum": 0.3}, {"min": [0, 0, 0], "max": [0.3, 0.3, 0.3]},
        {"targets_in": "workspace"}, {"objects_in_scene": True}, {"speed": {"const": 0.1}},
        {"id": "x", "skill": "say", "effect": "allow"}, [], {},
    ]
)  # fmt: skip
MUTATION_PATHS = st.lists(
    st.one_of(st.integers(0, 10), st.sampled_from(["when", "args", "speed"])), max_size=6
)


# ---------------------------------------------------------------- tests
@FUZZ
@given(content=st.one_of(st.text(max_size=300), st.binary(max_size=300)))
def test_random_text_and_bytes(policy_path, content):
    check_load(policy_path, content)


@FUZZ
@given(tokens=st.lists(TOKENS, max_size=40))
def test_yaml_token_soup(policy_path, tokens):
    check_load(policy_path, "".join(tokens))


@settings(FUZZ, max_examples=max(EXAMPLES // 2, 1))
@given(
    kind=st.sampled_from(["flow-list", "flow-map", "block", "block-seq"]),
    depth=st.integers(1, 3000),
)
def test_deep_yaml(policy_path, kind, depth):
    check_load(policy_path, deep_text(kind, depth))


@settings(FUZZ, max_examples=max(EXAMPLES // 2, 1))
@given(depth=st.integers(1, 3000), wide=st.integers(1, 9), cyclic=st.booleans())
def test_deep_huge_and_cyclic_dicts(depth, wide, cyclic):
    rules = copy.deepcopy(DEFAULT["rules"])
    nested = deep_value(depth, wide)
    if cyclic:
        loop: list[Any] = []
        loop.append(loop)
        nested = [nested, loop]
    rules[0]["when"]["args"]["speed"]["enum"] = nested
    check_dict({**DEFAULT, "rules": rules})
    check_dict(nested)


@FUZZ
@given(
    edits=st.lists(st.tuples(MUTATION_PATHS, st.one_of(PLAUSIBLE, JSONISH)), max_size=3),
    as_file=st.booleans(),
    duplicate=st.one_of(st.none(), st.integers(0, 200)),
)
def test_mutated_valid_policies(policy_path, edits, as_file, duplicate):
    data = copy.deepcopy(DEFAULT)
    for path, value in edits:
        data = set_path(data, path, value)
    if not as_file:
        check_dict(data)
        return
    try:
        text = yaml.safe_dump(data, allow_unicode=True)
    except (yaml.YAMLError, ValueError):  # e.g. ints too long for str(): only JSON then
        text = json.dumps(data, default=str)
    lines = text.splitlines(keepends=True)
    if duplicate is not None and lines:  # repeat a line: often a duplicate key
        at = duplicate % len(lines)
        lines.insert(at, lines[at])
    check_load(policy_path, "".join(lines))


@FUZZ
@given(value=JSONISH)
def test_random_schemas(policy_path, value):
    """Any value as a rule's argument schema, through a file and through a dict."""
    rule = {"id": "r", "skill": "pick", "effect": "allow", "when": {"args": {"speed": value}}}
    data = {"version": 1, "rules": [rule]}
    check_dict(data)
    check_load(policy_path, json.dumps(data, allow_nan=True))


def test_known_hostile_files_quickly(policy_path):
    """A few fixed inputs the strategies above find only rarely."""
    for content in (
        "version: 1\nrules: &r [*r]\n",
        "a: &a [1,1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n",
        "version: 1\nbudgets: {max_motion_seconds: " + "1" * 3000 + ".5}\n",
        "version: 1\nrules: [{id: r, skill: pick, effect: allow, when: {args: {obj: "
        '{"multipleOf": 1e-308}}}}]\n',
        "version: 1\nrules: [{id: r, skill: pick, effect: allow, when: {args: {speed: "
        '{"multipleOf": 1e-308, "maximum": 1e308}}}}]\n',
        b"\xff\xfe" + "version: 1\n".encode("utf-16-le"),
    ):
        check_load(policy_path, content)
