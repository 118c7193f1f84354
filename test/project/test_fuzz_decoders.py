"""Fuzz every decoder of what arrives on a topic or from a cache file (issue 13, finding 5):
random text and bytes, JSON token soup, random deep (to 120000 levels) and huge (10 MB strings,
20000-digit numbers) payloads, and valid reward specs with one part replaced by a bad value.

Entry points: ``wire_json`` (``decode_json``, ``decode_json_object``, ``decode_status``: the
controller's, planner's and recorder's decoding), ``validate_spec`` on text and on Python data
(the controller's validation), the terminal's ``StatusModel.fold``, the recorder's
``status_from_cdr`` and its ``EpisodeTracker``, and the LLM cache's JSONL read. Whatever comes
in, only the declared error type may come out (``MessageError``, ``RewardSpecError``; the
terminal and the cache raise nothing), the error says what was wrong in one line, and what is
accepted can be logged and re-encoded.
"""

from __future__ import annotations

import copy
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.fuzz import EXAMPLES, FUZZ

from lang2policy.errors import RewardSpecError
from lang2policy.llm import ExchangeCache, LLMReply, build_request, local_config
from lang2policy.recording.episodes import EpisodeTracker
from lang2policy.rewards.spec import Validated, validate_spec
from lang2policy.terminal import StatusModel, render_toolbar, toolbar_segments

OBJECTS = ["red block", "blue bowl"]
VALID_SPEC = {
    "version": 1,
    "task": "lift the red block",
    "duration": 8.0,
    "terms": [
        {"term": "reach", "weight": 1.0, "params": {"object": "red block"}},
        {"id": "lift", "term": "object_height", "params": {"object": "red block", "height": 0.1}},
        {"term": "tool_to_point", "params": {"point": [0.2, 0.0, 0.1]}},
    ],
    "success": {"all": [{"term": "lift", "below": 0.02}], "hold": 0.5},
}


# ------------------------------------------------------------------------------ strategies
def deep(levels: int, opener: str, inner: str = "1") -> str:
    """``inner`` nested ``levels`` deep in ``opener`` ('[' or '{"a":'), closed or left open."""
    closer = "]" if opener.startswith("[") else "}"
    return opener * levels + inner + closer * levels


SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=4300, max_value=5000).map(lambda n: 7 * 10**n)  # past str(int)
    | st.floats()  # NaN and infinities included
    | st.text(max_size=30)
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=30,
)
TOKENS = st.sampled_from(
    ["[", "]", "{", "}", '"', "\\", ":", ",", " ", "1", "-", ".", "e9", "e999", "NaN",
     "Infinity", "true", "null", '"state"', '"ok"', '"\\ud800"', '"\\ud83d\\ude00"', "9" * 400,
     '"term"', "\u2028", "\x00", "é"]
)  # fmt: skip
DEEP_TEXT = st.builds(
    deep,
    st.integers(min_value=1, max_value=120_000),
    st.sampled_from(["[", '{"a":', '[{"state":"ok","x":', '{"state":"ok","detail":[']),
    st.sampled_from(["1", '"x"', "", "[]"]),
)
HUGE_TEXT = st.one_of(
    st.integers(min_value=1, max_value=20_000).map(lambda n: "9" * n),
    st.integers(min_value=1, max_value=20_000).map(lambda n: '{"state": "ok", "n": -' + "7" * n),
    st.sampled_from([1 << 20, 10 << 20]).map(lambda n: '{"state": "' + "x" * n + '"}'),
    st.integers(min_value=1, max_value=1000).map(lambda n: '{"state": "ok", "f": 1' + "0" * n),
)


def dumps(value: Any) -> str:
    try:
        return json.dumps(value)
    except ValueError:  # an int past the str() limit: its digits, as a peer could send them
        return "9" * 5000


TEXTS = st.one_of(
    st.text(),
    st.lists(TOKENS, max_size=300).map("".join),
    JSON_VALUES.map(dumps),
    st.fixed_dictionaries({"state": JSON_VALUES, "node": JSON_VALUES}, optional={
        "detail": JSON_VALUES, "instruction": JSON_VALUES, "stats": JSON_VALUES,
        "task": JSON_VALUES, "reason": JSON_VALUES}).map(dumps),
    DEEP_TEXT,
    HUGE_TEXT,
)  # fmt: skip


def deep_python(levels: int) -> list:
    """A list nested ``levels`` deep, built without recursion."""
    value: list = []
    for _ in range(levels):
        value = [value]
    return value


EVIL = st.one_of(
    JSON_VALUES,
    st.integers(min_value=2, max_value=100_000).map(deep_python),
    st.just(10**5000),
    st.just(-(10**400)),
    st.just(["reach"]),
    st.just({"term": "reach"}),
    st.text(min_size=2000, max_size=3000),
    st.sampled_from([object(), b"bytes", {1, 2}, (0.1, 0.2, 0.3), {1: "x"}, float("nan")]),
)


def paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path (keys and indexes) to a part of ``value``."""
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += paths(item, (*prefix, index))
    return found


SPEC_PATHS = paths(VALID_SPEC)[1:]


@st.composite
def mutated_specs(draw) -> dict:
    """The valid spec with one part replaced by a bad value (a list where a term name
    belongs, a dict where a number belongs, a huge int, a deep list, ...)."""
    spec = copy.deepcopy(VALID_SPEC)
    path = draw(st.sampled_from(SPEC_PATHS))
    parent = spec
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = draw(EVIL)
    return spec


# ------------------------------------------------------------------------------ checks
def assert_refusal(exc: Exception, what: str) -> None:
    text = str(exc)
    assert text and len(text.splitlines()) == 1, f"not one line: {text[:300]!r}"
    assert what in text, f"does not name {what!r}: {text[:300]!r}"


def assert_loggable(value: Any) -> None:
    """What a decoder accepted can be re-encoded as strict JSON and UTF-8 (to log or publish)."""
    json.dumps(value, allow_nan=False, ensure_ascii=False).encode("utf-8")


def check_wire(text: str | bytes) -> None:
    # imported here, not at the top: the other decoders' tests run without the new module
    from lang2policy.wire_json import (
        MAX_DEPTH,
        MessageError,
        decode_json,
        decode_json_object,
        decode_status,
        nesting_depth,
    )

    for decode in (decode_json, decode_json_object, decode_status):
        try:
            value = decode(text, what="/fuzz/topic")
        except MessageError as exc:
            assert_refusal(exc, "/fuzz/topic")
            continue
        assert_loggable(value)
        assert nesting_depth(json.dumps(value)) <= MAX_DEPTH
        if decode is decode_status:
            assert isinstance(value["state"], str)


def check_spec(data: Any) -> None:
    try:
        validated = validate_spec(data, OBJECTS)
    except RewardSpecError as exc:
        assert exc.args and len(str(exc).splitlines()) == 1, str(exc)[:300]
        return
    assert isinstance(validated, Validated)
    json.loads(validated.spec.to_json())  # what the controller runs re-encodes
    validated.spec.task.encode("utf-8")  # and its task can be logged


def check_terminal(text: object) -> None:
    model = StatusModel()
    event = model.fold(text)
    if event is not None:
        event.line.encode("utf-8")
    render_toolbar(toolbar_segments(model), width=120).encode("utf-8")


def check_recorder(text: str) -> None:
    pytest.importorskip("rclpy")
    from rclpy.serialization import serialize_message
    from std_msgs.msg import String

    check_recorder_bytes(serialize_message(String(data=text)))


def check_recorder_bytes(data: bytes) -> None:
    from lang2policy.ros.recorder_node import status_from_cdr
    from lang2policy.wire_json import MessageError

    try:
        status = status_from_cdr(data)
    except MessageError as exc:
        assert_refusal(exc, "/lang2policy/status")
        return
    tracker = EpisodeTracker(linger=0.5)
    tracker.on_status(status, 1.0)
    tracker.on_status({"state": "done", "instruction": "x"}, 2.0)
    tracker.poll(5.0)


# ------------------------------------------------------------------------------ tests
BYTES = st.binary(max_size=300) | TEXTS.map(lambda t: t.encode("utf-8", "surrogatepass"))


@FUZZ
@given(payload=TEXTS | BYTES)
def test_wire_decoders_decode_or_refuse_with_one_error(payload):
    check_wire(payload)


@FUZZ
@given(payload=TEXTS | BYTES)
def test_spec_text_is_a_spec_or_a_spec_error(payload):
    check_spec(payload)


@FUZZ
@given(payload=TEXTS | BYTES)
def test_the_terminal_folds_any_status_text_without_raising(payload):
    check_terminal(payload)


@FUZZ
@given(spec=mutated_specs() | EVIL)
def test_malformed_spec_shapes_are_spec_errors(spec):
    check_spec(spec)
    if _is_json(spec):  # the same shape as a peer would publish it
        check_spec(dumps(spec))


def _is_json(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=True)
    except (TypeError, ValueError, RecursionError):
        return False
    return True


@FUZZ
@given(text=TEXTS.filter(lambda t: len(t) < (2 << 20) and "\x00" not in t))
def test_recorder_status_lines_are_decoded_or_refused(text):
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a ROS String cannot carry it: not a message
        return
    check_recorder(text)


@settings(max_examples=EXAMPLES, deadline=None, database=None)
@given(data=st.binary(max_size=64))
def test_recorder_survives_any_bytes_as_a_status_message(data):
    pytest.importorskip("rclpy")
    check_recorder_bytes(data)


@pytest.fixture(scope="module")
def cache_folder():
    with tempfile.TemporaryDirectory(prefix="fuzz-cache-") as folder:
        yield Path(folder)


@FUZZ
@given(lines=st.lists(TEXTS | st.binary(max_size=200), min_size=1, max_size=4))
def test_cache_lines_that_do_not_decode_are_skipped(cache_folder, lines):
    path = cache_folder / "exchanges.jsonl"
    path.unlink(missing_ok=True)
    request = build_request(local_config(), "# a prompt\n", max_tokens=16)
    reply = LLMReply(
        text="answer",
        finish_reason="stop",
        prompt_tokens=1,
        completion_tokens=1,
        latency_s=0.1,
        model=request.model,
    )
    ExchangeCache(path).put(request, reply)
    with path.open("ab") as stream:
        for line in lines:
            raw = line if isinstance(line, bytes) else line.encode("utf-8", "surrogatepass")
            stream.write(raw + b"\n")
    cache = ExchangeCache(path)
    assert cache.get(request)["text"] == "answer"  # the good line survives its bad neighbours


def test_the_reported_status_lines_are_refused_with_their_reason():
    """The payloads of the issue, each refused for the reason it is bad."""
    from lang2policy.wire_json import MessageError, decode_status

    cases = [
        ("[" * 100_000 + "]" * 100_000, "100000 levels deep; at most 64"),
        ('{"state": "ok", "n": ' + "1" * 5000 + "}", "5000 characters; at most 100"),
        ('{"state": "' + "x" * (10 << 20) + '"}', "at most 1048576"),
        ('{"state": NaN}', "NaN is not allowed"),
        ('{"state": "ok", "x": 1e999}', "finite"),
        ('{"state": "\\udc00"}', "unpaired surrogate"),
        ("[1, 2]", "expected a JSON object, got an array"),
        ('{"state": ["ok"]}', "expected a text 'state', got an array"),
        ("{not json", "not valid JSON"),
    ]
    for text, reason in cases:
        with pytest.raises(MessageError, match=r"^/lang2policy/safety: ") as caught:
            decode_status(text, what="/lang2policy/safety")
        assert reason in str(caught.value), (reason, str(caught.value)[:200])
    assert decode_status('{"state": "ok", "n": 1.5, "s": "\\ud83d\\ude00"}')["s"] == "\U0001f600"


def test_the_reported_spec_shapes_are_refused_with_their_reason():
    spec_cases = [
        ({"terms": [{"term": ["reach"]}]}, "unknown term ['reach']"),
        ({"terms": [{"term": "reach", "weight": {"x": 1}, "params": {"object": "red block"}}]},
         "expected a number"),
        ({"terms": [{"term": "reach", "weight": 10**5000, "params": {"object": "red block"}}]},
         "beyond the range"),
        ({"terms": [{"term": "tool_to_point", "params": {"point": deep_python(100_000)}}]},
         "nested at most 16 levels"),
        ({"terms": [{"term": "reach", "params": {"object": "red block"}}],
          "success": {"all": [{"term": ["lift"], "below": 1}]}}, "is not a term id"),
        ('{"terms": [{"term": "reach", "weight": ' + "9" * 5000 + "}]}", "5000 characters"),
    ]  # fmt: skip
    for spec, reason in spec_cases:
        with pytest.raises(RewardSpecError) as caught:
            validate_spec(spec, OBJECTS)
        assert reason in str(caught.value), (reason, str(caught.value)[:200])
    assert validate_spec(json.dumps(VALID_SPEC), OBJECTS).spec.task == "lift the red block"
