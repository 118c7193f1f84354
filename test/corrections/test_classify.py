"""The fixed rules that sort a correction into stop / speed / offset / target / replan."""

from __future__ import annotations

import pytest

from lang2policy.corrections import Correction, CorrectionError, classify
from lang2policy.errors import Lang2PolicyError, UnknownObjectError

SCENE = ["red block", "blue block", "green bowl", "yellow bowl"]


@pytest.mark.parametrize(
    "text",
    [
        "stop",
        "Stop!",
        "halt",
        "FREEZE",
        "please stop now",
        "e-stop",
        "wait",
        "wait!",
        "hold on",
        "stop, a bit to the left",
    ],
)
def test_stop_words_stop_without_anything_else(text):
    correction = classify(text, SCENE)
    assert correction.kind == "stop"
    assert correction.edit() == {}


def test_a_negated_stop_and_a_wait_with_more_to_say_are_not_stops():
    assert classify("don't stop", SCENE).kind == "replan"
    later = classify("wait, the blue block", SCENE, ["red block"])
    assert (later.kind, later.target) == ("target", "blue block")


@pytest.mark.parametrize(
    ("text", "factor"),
    [
        ("slower", 0.5),
        ("Slower please", 0.5),
        ("slow down", 0.5),
        ("too fast", 0.5),
        ("much slower", 0.3),
        ("way slower", 0.3),
        ("a bit slower", 0.75),
        ("faster", 1.5),
        ("speed up", 1.5),
        ("too slow", 1.5),
        ("much faster", 2.0),
        ("a little faster", 1.25),
        ("half speed", 0.5),
        ("twice as fast", 2.0),
        ("2x slower", 0.5),
    ],
)
def test_speed_corrections_carry_a_factor(text, factor):
    correction = classify(text, SCENE)
    assert correction.kind == "speed"
    assert correction.factor == pytest.approx(factor)
    assert correction.speed is None


@pytest.mark.parametrize(
    ("text", "speed"),
    [
        ("at 3 cm/s", 0.03),
        ("50 mm/s", 0.05),
        ("go 0.1 m/s", 0.1),
        ("slower, 2 cm per second", 0.02),
    ],
)
def test_an_explicit_speed_is_absolute(text, speed):
    correction = classify(text, SCENE)
    assert (correction.kind, correction.factor) == ("speed", None)
    assert correction.speed == pytest.approx(speed)


CM = 0.01


@pytest.mark.parametrize(
    ("text", "offset"),
    [
        ("a bit to the left", (0, 2 * CM, 0)),
        ("a little to the right", (0, -1.5 * CM, 0)),
        ("slightly higher", (0, 0, 1 * CM)),
        ("a tiny bit left", (0, 1 * CM, 0)),
        ("much higher", (0, 0, 5 * CM)),
        ("a lot further away", (5 * CM, 0, 0)),
        ("further away", (2 * CM, 0, 0)),
        ("further left", (0, 2 * CM, 0)),
        ("a bit closer", (-2 * CM, 0, 0)),
        ("toward me", (-2 * CM, 0, 0)),
        ("3 cm to the left", (0, 3 * CM, 0)),
        ("30 mm to the right", (0, -3 * CM, 0)),
        ("0.03 m closer", (-3 * CM, 0, 0)),
        ("three centimetres forward", (3 * CM, 0, 0)),
        ("lower", (0, 0, -2 * CM)),
        ("up", (0, 0, 2 * CM)),
        ("no, more to the left", (0, 2 * CM, 0)),
        ("too far left", (0, -2 * CM, 0)),
        ("too high", (0, 0, -2 * CM)),
        ("too far", (-2 * CM, 0, 0)),
        ("move it 2 cm forward and 1 cm up", (2 * CM, 0, 1 * CM)),
    ],
)
def test_offsets_in_the_persons_frame(text, offset):
    correction = classify(text, SCENE)
    assert correction.kind == "offset", correction
    assert correction.offset == pytest.approx(offset)


@pytest.mark.parametrize(
    ("text", "acting", "target", "replaces"),
    [
        ("no, the blue one", ["red block"], "blue block", "red block"),
        ("the blue block instead", ["red block", "green bowl"], "blue block", "red block"),
        ("not that one, the yellow bowl", ["red block", "green bowl"], "yellow bowl", "green bowl"),
        ("I meant the yellow bowl", ["green bowl"], "yellow bowl", "green bowl"),
        ("not the red one, the blue one", [], "blue block", "red block"),
        ("the blue block, not the red block", [], "blue block", "red block"),
        ("the other block", ["red block"], "blue block", "red block"),
        ("blue", ["red block"], "blue block", "red block"),
        ("no, the blue cube", ["red block"], "blue block", "red block"),
    ],
)
def test_target_changes_resolve_to_a_scene_object(text, acting, target, replaces):
    correction = classify(text, SCENE, acting)
    assert (correction.kind, correction.target, correction.replaces) == ("target", target, replaces)


def test_a_colour_alone_takes_the_kind_of_the_current_target():
    scene = ["red block", "blue block", "blue bowl"]
    assert classify("no, the blue one", scene, ["red block"]).target == "blue block"
    assert classify("no, the blue one", ["red bowl", *scene], ["red bowl"]).target == "blue bowl"
    with pytest.raises(UnknownObjectError, match=r"could be any of \['blue block', 'blue bowl'\]"):
        classify("no, the blue one", scene)


def test_a_target_that_is_not_on_the_table_lists_the_objects():
    with pytest.raises(UnknownObjectError) as caught:
        classify("no, the purple one", SCENE, ["red block"])
    message = str(caught.value)
    assert "no purple on the table" in message
    assert all(name in message for name in SCENE)


@pytest.mark.parametrize(
    "text",
    [
        "put it in the blue bowl",
        "lift the blue block",
        "stack the blocks",
        "lower it slowly",
        "a bit to the left of the yellow bowl",
        "the left one",
        "move up slowly",
        "what are you doing",
        "i am here",
    ],
)
def test_anything_else_is_replanned_with_its_text(text):
    correction = classify(text, SCENE, ["red block"])
    assert correction.kind == "replan"
    assert correction.text == text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("x" * 301, "at most 300"),
        ("left\x00", "control characters"),
        (None, "must be text"),
        (42, "must be text"),
        ("2 m to the left", "more than 15 cm"),
        ("at 5 m/s", "outside"),
    ],
)
def test_bad_input_is_rejected_with_a_reason(text, message):
    with pytest.raises(CorrectionError, match=message):
        classify(text, SCENE)


def test_bad_object_lists_are_rejected():
    with pytest.raises(CorrectionError, match="list of object names"):
        classify("left", "red block")
    with pytest.raises(CorrectionError, match="non-empty object names"):
        classify("left", ["red block", ""])


def test_errors_share_the_project_root():
    assert issubclass(CorrectionError, Lang2PolicyError)


@pytest.mark.parametrize(
    "text",
    ["stop", "slower", "at 3 cm/s", "3 cm to the left", "no, the blue one", "put it in the bowl"],
)
def test_corrections_round_trip_through_json(text):
    correction = classify(text, SCENE, ["red block"])
    assert Correction.from_dict(correction.to_dict()) == correction
    assert correction.describe()


@pytest.mark.parametrize(
    "data",
    [
        {"kind": "jump"},
        {"kind": "offset", "offset": [0, 1]},
        {"kind": "speed", "factor": float("nan")},
        {"kind": "speed", "colour": "red"},
        {"kind": "target", "target": 3},
        "stop",
    ],
)
def test_from_dict_rejects_malformed_records(data):
    with pytest.raises(CorrectionError):
        Correction.from_dict(data)
