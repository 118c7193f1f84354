"""The motion-descriptor template, its parser, the grammars and the prompts (no LLM)."""

from __future__ import annotations

import pytest

from lang2policy.l2r.coder import LINE_CALLS, description_code, extract_code
from lang2policy.l2r.grammar import (
    about_gripper,
    code_grammar,
    description_grammar,
    grammar_regex,
    ground_numbers,
    mentioned,
    missing_objects,
)
from lang2policy.l2r.prompts import RewardPrompts, annotate
from lang2policy.l2r.sandboxed import run_reward_code
from lang2policy.l2r.template import (
    LINES,
    TEMPLATE,
    DescriptionError,
    Num,
    extract_block,
    parse_description,
    template_text,
    unfilled_slots,
)

OBJECTS = ["red block", "blue bowl", "green block"]
POSITIONS = {"red block": (0.2, 0.1, 0.01), "blue bowl": (0.22, -0.08, 0.0),
             "green block": (0.15, -0.12, 0.01)}
EVERY_LINE = [
    "* This is a new task.",
    "* The object to manipulate is red block.",
    "* The object should be grasped.",
    "* The object should be lifted 0.1 m above the table.",
    "* The object should be moved to the point x = 0.25 m, y = -0.05 m.",
    "* The object should be placed on blue bowl.",
    "* The object should be pushed, without grasping it, to the point x = 0.2 m, y = 0.0 m.",
    "* The object should be pushed, without grasping it, 0.05 m away from the robot.",
    "* The object should be turned to a heading of -30 degrees.",
    "* The object should be turned by 45 degrees.",
    "* The object should stand upright.",
    "* The gripper should hover 0.1 m above the point x = 0.2 m, y = 0.1 m.",
    "* The gripper should move to the point x = 0.2 m, y = 0.0 m, z = 0.12 m.",
    "* The gripper should move no faster than 0.05 m/s.",
    "* The gripper should stay out of the box centred at x = 0.2 m, y = 0.05 m, with a half "
    "size of 0.04 m.",
    "* The gripper should be open.",
    "* The task should take at most 12 seconds.",
]


def block(lines: list[str]) -> str:
    return "\n".join(["[start of description]", *lines, "[end of description]"])


def test_the_template_has_typed_slots_for_every_line():
    text = template_text()
    assert text.startswith("[start of description]\n* This {CHOICE: [is, is not]} a new task.")
    assert "* [optional] The object should be lifted [NUM: 0.1] m above the table." in text
    assert "{CHOICE: [no faster than, at least]} [NUM: 0.1] m/s" in text
    assert len(TEMPLATE) == len(EVERY_LINE) and set(LINE_CALLS) == {
        line.key for line in TEMPLATE if line.optional}


def test_a_filled_description_parses_into_slot_values():
    d = parse_description("Sure.\n" + block(EVERY_LINE) + "\nDone.", OBJECTS)
    assert d.new_task and d.object == "red block" and d.unknown == ()
    assert d.lines == tuple(line.key for line in TEMPLATE)
    assert d.values["lift"] == 0.1 and d.values["move_y"] == -0.05 and d.values["yaw"] == -30
    assert d.values["place_on"] == "blue bowl" and d.values["speed_mode"] == "no faster than"
    assert d.values["push_direction"] == "away from the robot"
    assert d.values["avoid_half"] == 0.04 and d.values["gripper"] == "open"
    assert d.block().startswith("[start of description]\n* This is a new task.")


def test_parsing_is_lenient_on_form_and_strict_on_content():
    lenient = ("- [optional] This IS NOT a new task.\n* The object to manipulate is Red Block.\n"
               "* The object should be lifted 0.15 m above the table.\n* Please be careful.")
    d = parse_description(lenient, OBJECTS)
    assert not d.new_task and d.object == "red block" and d.unknown == ("Please be careful.",)
    with pytest.raises(DescriptionError, match="unfilled slots"):
        parse_description(block([EVERY_LINE[0], EVERY_LINE[1],
                                 "* The object should be lifted [NUM: 0.1] m."]), OBJECTS)
    with pytest.raises(DescriptionError, match="unfilled slots"):
        parse_description(block(["* This {CHOICE: [is, is not]} a new task."]), OBJECTS)
    with pytest.raises(DescriptionError, match="lacks the line '\\* This"):
        parse_description(block([EVERY_LINE[1]]), OBJECTS)
    with pytest.raises(DescriptionError, match="'purple bowl' is not in the scene"):
        parse_description(block([EVERY_LINE[0], "* The object to manipulate is purple bowl."]),
                          OBJECTS)
    with pytest.raises(DescriptionError, match="no description between"):
        extract_block("I cannot do that.")
    assert extract_block("[start of description]\n* cut") == "* cut"
    assert unfilled_slots("* a [NUM: 1]\n* b\n* {CHOICE: [x]}") == ["* a [NUM: 1]",
                                                                   "* {CHOICE: [x]}"]


def test_every_line_becomes_one_api_call_that_runs_and_validates():
    d = parse_description(block(EVERY_LINE), OBJECTS)
    code = description_code(d, new_task=True)
    assert code.splitlines()[0] == "reset_reward()" and code.endswith("execute_plan()\n")
    assert 'set_push_by("red block", 0.05, "away from the robot")' in code
    assert "avoid_region([0.2, 0.05, 0.05], 0.04)" in code and "set_gripper(1.0)" in code
    result = run_reward_code(code, OBJECTS, "every line", positions=POSITIONS,
                             headings={"red block": 0.0})
    assert result.executed and result.spec.duration == 12.0
    assert len(result.calls) == len(EVERY_LINE)  # reset + 15 lines + execute_plan
    assert description_code(d, new_task=False).startswith("set_grasp(")


def test_the_description_grammar_admits_filled_descriptions_only():
    grammar = description_grammar(OBJECTS, focus=OBJECTS)
    regex = grammar_regex(grammar)
    answer = "\n".join(EVERY_LINE[:2] + EVERY_LINE[3:4]) + "\n[end of description]"
    assert regex.fullmatch(answer)
    full = "\n".join(EVERY_LINE) + "\n[end of description]"
    assert regex.fullmatch(full)
    bad = [
        "\n".join(EVERY_LINE[:2]) + "\n[end of description]",  # no action line
        answer.replace("lifted 0.1", "lifted [NUM: 0.1]"),  # unfilled
        answer.replace("red block", "purple bowl"),  # not in the scene
        "\n".join([EVERY_LINE[0], "* The object to manipulate is none.", EVERY_LINE[3]])
        + "\n[end of description]",  # an object line without an object
        "\n".join([*EVERY_LINE[:2], "* The object should be placed on red block."])
        + "\n[end of description]",  # on itself
        "\n".join([*EVERY_LINE[:2], EVERY_LINE[4], EVERY_LINE[3]]) + "\n[end of description]",
    ]
    for text in bad:
        assert not regex.fullmatch(text), text
    for text in (answer, full):  # what the grammar admits parses
        parse_description("[start of description]\n" + text, OBJECTS)


def test_the_grammar_limits_objects_to_those_named_and_numbers_to_those_stated():
    instruction = "lift the red block 10 cm"
    numbers = ground_numbers(instruction, mentioned(instruction, OBJECTS), POSITIONS)
    regex = grammar_regex(description_grammar(OBJECTS, ["red block"], None, numbers, False))
    lift = "\n".join(EVERY_LINE[:2] + EVERY_LINE[3:4]) + "\n[end of description]"
    assert regex.fullmatch(lift)
    assert not regex.fullmatch(lift.replace("0.1 m", "0.2 m"))  # 10 cm was said
    assert not regex.fullmatch(lift.replace("red block", "green block"))
    edit = lift.replace("This is a", "This is not a").replace("0.1 m", "0.15 m")
    assert regex.fullmatch(edit)  # corrections compute new numbers
    hover = description_grammar(OBJECTS, ["blue bowl"], None,
                                ground_numbers("hover above the blue bowl", ["blue bowl"],
                                               POSITIONS), True)
    assert grammar_regex(hover).fullmatch(
        "* This is a new task.\n* The object to manipulate is none.\n* The gripper should "
        "hover 0.3 m above the point x = 0.22 m, y = -0.08 m.\n[end of description]")
    nothing_named = grammar_regex(description_grammar(OBJECTS))
    assert not nothing_named.fullmatch(lift)  # no object named, none before: "none" only


def test_numbers_are_grounded_by_kind():
    found = ground_numbers("move the gripper slowly (under 5 cm/s) to x=0.21 m, y=-0.05, "
                           "8 cm up, turn 30 degrees within 12 s", ["red block"], POSITIONS)
    assert found == {"length": [0.08], "speed": [0.05], "angle": [30.0], "time": [12.0],
                     "x": [0.21], "y": [-0.05], "z": [],
                     "speed_mode": ["no faster than"]}
    above = ground_numbers("hold the gripper 10 cm above the red block", ["red block"],
                           POSITIONS)
    assert above["x"] == [0.2] and above["y"] == [0.1] and above["length"] == [0.1]
    assert ground_numbers("quickly")["speed"] == [0.2]
    assert ground_numbers("quickly")["speed_mode"] == ["at least"]
    slow = grammar_regex(description_grammar(OBJECTS, numbers=ground_numbers("slowly")))
    line = "* The gripper should move {} 0.05 m/s.\n"
    head = "* This is a new task.\n* The object to manipulate is none.\n"
    assert slow.fullmatch(head + line.format("no faster than") + "[end of description]")
    assert not slow.fullmatch(head + line.format("at least") + "[end of description]")


def test_objects_named_in_an_instruction():
    assert mentioned("put the red block in the blue bowl", OBJECTS) == ["red block",
                                                                        "blue bowl"]
    assert mentioned("lift the bowl", OBJECTS) == ["blue bowl"]  # the only bowl
    assert mentioned("lift the block", OBJECTS) == []  # two blocks: ambiguous
    assert about_gripper("keep the gripper above it") and not about_gripper("lift it")
    assert missing_objects("put the purple block in the blue bowl", OBJECTS) == ["purple block"]
    assert missing_objects("stack the yellow blocks on the red block", OBJECTS) == [
        "yellow block"]
    assert missing_objects("lift the left block", OBJECTS) == []


def test_the_code_grammar_admits_api_calls_only():
    regex = grammar_regex(code_grammar(OBJECTS, new_task=True))
    good = ('reset_reward()\nset_lift("red block", 0.1)\nset_push_by("green block", 0.05, '
            '"to the left")\navoid_region([0.2, -0.1, 0.05], 0.04)\nexecute_plan()\n'
            "[end of code]")
    assert regex.fullmatch(good)
    for bad in (good.replace("reset_reward()\n", ""), good.replace("red block", "unicorn"),
                good.replace("set_lift", "import os; set_lift"),
                good.replace('set_lift("red block", 0.1)', 'set_place_on("red block", '
                             '"red block")')):
        assert not regex.fullmatch(bad)
    assert not grammar_regex(code_grammar(OBJECTS, new_task=False)).fullmatch(good)


def test_the_coder_extracts_code_from_fences_and_delimiters():
    assert extract_code("```python\nset_lift('a', 1)\n```") == "set_lift('a', 1)\n"
    assert extract_code("[start of code]\nx()\n[end of code] bye") == "x()\n"
    assert extract_code("x()") == "x()\n"


def test_prompts_come_from_files_with_the_template_api_and_examples():
    prompts = RewardPrompts.load()
    assert "{CHOICE: [is, is not]}" in prompts.descriptor and "{motion_template}" not in (
        prompts.descriptor)
    assert "def set_push_by(obj, distance, direction):" in prompts.coder
    chat = prompts.descriptor_prompt()
    assert "[start of code]" not in chat and chat.count("User: ") >= len(prompts.examples)
    assert "User: lift the red block 10 cm (0.1 m)." in chat
    local = prompts.descriptor_prompt("rotate the orange block by 20 degrees")
    assert local.startswith(chat)  # the fixed part first: one cached prefix
    assert local[len(chat):].count("User: rotate the gray block by 30 degrees.") == 1
    assert "set_turn(\"gray block\", 30)" in prompts.coder_prompt()
    assert "User:" not in prompts.coder_prompt()


def test_lengths_are_annotated_in_metres():
    assert annotate("lift it 10 cm") == "lift it 10 cm (0.1 m)"
    assert annotate("at 5 cm/s and 20mm") == "at 5 cm/s (0.05 m/s) and 20mm (0.02 m)"
    assert annotate("lift it 10 cm (0.1 m)") == "lift it 10 cm (0.1 m)"


def test_template_numbers_have_kinds():
    kinds = {p.kind for line in TEMPLATE for p in line.parts if isinstance(p, Num)}
    assert kinds == {"length", "x", "y", "z", "speed", "angle", "time"}
    assert LINES["yaw"].about_object and not LINES["hover"].about_object
