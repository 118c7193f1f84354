"""Grounded decoding of policy code (issue 15, item 1): the GBNF grammar built from the skill
catalog and the scene, the same rules checked after decoding (``check_program``), and the
planner's hook that decodes under the grammar where the endpoint supports it.

The grammar is run by llama.cpp itself (``llama_sampler_init_grammar`` on the local model's
vocabulary, no weights): a text is accepted when every token of it passes the grammar sampler
and the end of text is allowed after it.
"""

from __future__ import annotations

import ast
import re

import numpy as np
import pytest
from support.grammar import PARSERS, rejected_at

from lang2policy.bench.cap_splits import EPISODE_SPLITS
from lang2policy.bench.cap_tasks import FAMILIES
from lang2policy.llm.config import LLMConfig
from lang2policy.llm.exchange import LLMReply
from lang2policy.planning.cap import CodeAsPoliciesPlanner
from lang2policy.planning.code_grammar import check_program, code_grammars, word_rules
from lang2policy.planning.grounding import GroundingSettings
from lang2policy.planning.prompts import PromptSet, default_prompt_dir
from lang2policy.scene.robot_description import available_robots, load_robot_description

SCENE = ["red block", "green block", "yellow bowl", "blue bowl"]


# ---------------------------------------------------------------- llama.cpp's grammar engine


def program_ok(vocab, objects, code: str) -> str | None:
    return rejected_at(vocab, code_grammars(objects, PARSERS).program, code.rstrip("\n") + "\n#")


# ---------------------------------------------------------------- the prompts' own programs
def _examples(text: str) -> list[tuple[list[str], str]]:
    """(objects, code) of every example program of a prompt file: the lines between a comment
    and the next comment or ``objects =`` line; a program followed by ``# error:`` (the repair
    example's failing one) is left out."""
    examples, objects, code = [], [], []
    lines = text.splitlines()
    for line in [*lines, "# end"]:
        if line.startswith(("#", "objects =")):
            if code and not line.startswith("# error:"):
                examples.append((objects, "\n".join(code) + "\n"))
            code = []
            if line.startswith("objects ="):
                objects = ast.literal_eval(line.split("=", 1)[1].strip())
        elif line.strip():
            code.append(line)
    return examples


def test_every_example_program_of_the_prompts_is_in_the_grammar(vocab):
    folder = default_prompt_dir()
    examples = _examples((folder / "main.txt").read_text())
    examples += _examples((folder / "repair_examples.txt").read_text())
    examples += _examples((folder / "parse_obj_name.txt").read_text())
    assert len(examples) >= 21
    refused = {
        code: rejected_at_
        for objects, code in examples
        if (rejected_at_ := program_ok(vocab, objects, code))
    }
    assert refused == {}


def test_every_helper_body_of_the_function_prompt_is_in_the_grammar(vocab):
    text = (default_prompt_dir() / "fgen.txt").read_text()
    bodies = re.findall(r"^def [^\n]*\n((?:    [^\n]*\n)+)", text, re.M)
    assert len(bodies) >= 6
    grammar = code_grammars(SCENE, PARSERS).function
    for body in bodies:
        assert rejected_at(vocab, grammar, body + "\n#") is None, body


@pytest.mark.parametrize(
    ("code", "where"),
    [
        ("put_first_on_second('red block', 'pink bowl')", "pink bowl"),  # not on the table
        ("put_first_on_second('blue bowl', 'red block')", "blue bowl"),  # only blocks are picked
        ("pick(obj='yellow bowl')", "yellow bowl"),
        ("x = 'purple block'", "purple block"),  # an object-like literal anywhere
        ("pick('red block', 0.1, 3)", ", 3)"),  # pick takes obj, speed
        ("put_first_on_second('red block')", ")"),  # the target is required
        ("put_first_on_second('red block', colour='blue')", "='blue'"),  # no such keyword
        ("get_corner_pos('top middle')", "middle"),  # not a corner
        ("for = 3", " = 3"),  # a keyword is no name
        ("say('hi'", "\n#"),  # unclosed: the program cannot end
    ],
)
def test_the_grammar_refuses_what_is_not_grounded(vocab, code, where):
    rest = program_ok(vocab, SCENE, code)
    assert rest is not None and (where in rest or rest == where), rest


def test_an_instruction_naming_its_objects_keeps_the_main_code_to_them(vocab):
    """ "Drop the red block into the blue bowl": the main code may name only those two (a small
    model copies its example's colours when they are on the table too); the parsing helpers'
    grammar and the helpers' bodies still range over every object present."""
    grammars = code_grammars(SCENE, PARSERS, focus=["red block", "blue bowl"])
    end = "\n#"
    assert (
        rejected_at(vocab, grammars.main, "put_first_on_second('red block', 'blue bowl')" + end)
        is None
    )
    rest = rejected_at(
        vocab, grammars.main, "put_first_on_second('green block', 'blue bowl')" + end
    )
    assert rest is not None and "green block" in rest, rest
    rest = rejected_at(
        vocab, grammars.main, "put_first_on_second('red block', 'yellow bowl')" + end
    )
    assert rest is not None and "yellow bowl" in rest, rest
    assert rejected_at(vocab, grammars.program, "ret_val = 'green block'" + end) is None
    # a literal position copied from an example's history is no target the person named
    rest = rejected_at(vocab, grammars.main, "put_first_on_second('red block', np.array([0.2]))")
    assert rest is not None and rest.lstrip().startswith(("np", ".array")), rest
    itself = "put_first_on_second(obj='red block', target=parse_obj_name('the red block'))"
    assert rejected_at(vocab, grammars.main, itself + end) is not None  # nothing to look up
    closest = code_grammars(SCENE, PARSERS, ["red block", "blue bowl"], "the bowl closest to it")
    assert rejected_at(vocab, closest.main, itself + end) is None
    corner = "put_first_on_second('red block', get_corner_pos('top left'))" + end
    assert rejected_at(vocab, grammars.main, corner) is not None  # no corner was asked for
    asked = "put the red block in the corner nearest the blue bowl"
    cornered = code_grammars(SCENE, PARSERS, ["red block", "blue bowl"], asked)
    assert rejected_at(vocab, cornered.main, corner) is None
    for copied in (
        "put_first_on_second('red block', np)",
        "put_first_on_second(block, 'blue bowl')",
    ):
        assert rejected_at(vocab, grammars.main, copied + end) is not None, copied
    target = "put_first_on_second('red block', parse_position('a point left of the blue bowl'))"
    assert rejected_at(vocab, grammars.main, target + end) is not None  # nothing spatial asked
    spatial = code_grammars(SCENE, PARSERS, ["red block", "blue bowl"], "left of the blue bowl")
    assert rejected_at(vocab, spatial.main, target + end) is None
    assert rejected_at(vocab, grammars.program, "x = np.array([0.2, 0.1, 0.0])" + end) is None
    # one object named ("put it in the blue bowl"): "it" is any block, but the only bowl the
    # main code may name is the blue one
    one = code_grammars(SCENE, PARSERS, focus=["blue bowl"], instruction="put it in the blue bowl")
    for block in ("red block", "green block"):
        assert (
            rejected_at(vocab, one.main, f"put_first_on_second({block!r}, 'blue bowl')" + end)
            is None
        )
    other_bowl = "put_first_on_second('red block', 'yellow bowl')" + end
    assert rejected_at(vocab, one.main, other_bowl) is not None
    assert rejected_at(vocab, one.program, other_bowl) is None  # parsing code names any
    # the plural keeps the kind open: "the bowls" may be any of them
    plural = code_grammars(SCENE, PARSERS, ["blue bowl"], "put the blocks in the bowls")
    assert rejected_at(vocab, plural.main, other_bowl) is None
    assert code_grammars(SCENE, PARSERS, focus=["pink bowl", "red block"]).main != one.program


def test_a_speed_is_a_literal_below_one_metre_per_second_when_the_person_asks_for_one(vocab):
    grammars = code_grammars(SCENE, PARSERS, instruction="slowly put the red block away")
    end = "\n#"
    ok = "put_first_on_second('red block', 'blue bowl', 0.05)" + end
    assert rejected_at(vocab, grammars.main, ok) is None
    assert rejected_at(vocab, grammars.main, "go_home(speed=0.2)" + end) is None
    for bad in ("1", "block", "speed"):
        code = f"put_first_on_second('red block', 'blue bowl', {bad})" + end
        assert rejected_at(vocab, grammars.main, code) is not None, bad
    # said nothing of speed: the default or none (not the 0.5 m/s of a repair example)
    plain = code_grammars(SCENE, PARSERS, instruction="put the red block in the blue bowl")
    assert rejected_at(vocab, plain.main, ok) is not None
    default = "put_first_on_second('red block', 'blue bowl', 0.15)" + end
    assert rejected_at(vocab, plain.main, default) is None
    assert rejected_at(vocab, plain.program, ok) is None  # helpers and parsing code: any


def test_the_grammar_admits_helpers_loops_and_free_text(vocab):
    code = (
        "blocks = get_block_names()\n"
        "for i, block in enumerate(blocks):\n"
        "    if is_obj_visible('pink bowl'):\n"
        "        say(f'moving {block}')\n"
        "    elif i > 0:\n"
        "        spot = get_obj_pos('yellow bowl') + np.array([0.0, 0.05, 0])\n"
        "        put_first_on_second(block, spot)\n"
        "    else:\n"
        "        put_first_on_second(obj=block, target='blue bowl', speed=0.1)\n"
        "block = parse_obj_name('the block left of the pink bowl')\n"
        "move_to(get_corner_pos(corner='top left'))\n"
        "go_home()\n"
    )
    assert program_ok(vocab, SCENE, code) is None
    problems = check_program(code, SCENE, PARSERS)  # the helper is for the generator to write
    assert len(problems) == 1 and problems[0].startswith("'get_block_names' is not a skill")


def test_names_leave_out_the_excluded_words_and_give_call_names_their_arguments(vocab):
    rules = "\n".join(['root ::= var "#"', *word_rules("var", ["pick", "pi", "in"])])
    for word in ("pi", "pick", "in"):
        assert rejected_at(vocab, rules, word + "#") is not None, word
    for word in ("p", "pic", "picks", "pick_block", "i", "inx", "x1", "_in"):
        assert rejected_at(vocab, rules, word + "#") is None, word
    calls = word_rules("name", [], {"pick": '"(" [0-9] ")"'})
    rules = "\n".join(['root ::= name "#"', 'call ::= "(" [a-z]* ")"', *calls])
    for text in ("pick(1)", "pic", "pic(x)", "picks(ab)", "x"):
        assert rejected_at(vocab, rules, text + "#") is None, text
    for text in ("pick(ab)", "pick"):  # a call name gets its own arguments, always
        assert rejected_at(vocab, rules, text + "#") is not None, text


# ---------------------------------------------------------------- check_program
def _oracle_programs():
    for robot in available_robots():
        description = load_robot_description(robot)
        for family in FAMILIES:
            for index, split in enumerate(EPISODE_SPLITS):
                rng = np.random.default_rng([index, len(family.name)])
                task = family.draw(rng, split.attributes, description.workspace.max_objects)
                yield (
                    f"{robot}-{family.name}-{split.name}",
                    task.objects,
                    family.reference(task, description),
                )


def test_every_oracle_program_of_bench_cap_passes_the_check():
    programs = list(_oracle_programs())
    assert len(programs) >= 2 * 7 * 4
    problems = {name: check_program(code, objects) for name, objects, code in programs}
    assert {name: p for name, p in problems.items() if p} == {}


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        ("put_first_on_second('red block', 'pink bowl')", "no 'pink bowl' on the table"),
        ("bowl = 'pink bowl'\npick(bowl)", "'pink bowl' names no object on the table"),
        ("pick_and_place('red block', 'blue bowl')", "'pick_and_place' is not a skill"),
        ("pick('red block', 0.1, 3)", "pick() takes at most 2 arguments"),
        ("put_first_on_second('red block')", "put_first_on_second() is missing target"),
        ("go_home(speeed=0.1)", "go_home() has no argument 'speeed'"),
        ("pick('red block', obj='green block')", "pick() got 'obj' twice"),
        ("get_corner_pos('top middle')", "not one of 'top left'"),
        ("put_first_on_second('red block',", "does not parse"),
        ("", "the program is empty"),
        ("put_first_on_second(block, 'blue bowl')", "the name 'block' is used but never assigned"),
    ],
)
def test_check_program_rejects_with_a_reason(code, reason):
    problems = check_program(code, SCENE)
    assert any(reason in p for p in problems), problems


def test_free_text_may_name_anything():
    code = (
        "say('I see no pink bowl, only the yellow bowl')\n"
        "if is_obj_visible('pink bowl'):\n"
        "    say(f'the pink bowl is at {get_obj_pos(\"yellow bowl\")}')\n"
        "block = parse_obj_name('the block closest to the pink bowl')\n"
        "if block == 'the block':\n"  # a description, not an object name
        "    pass\n"
    )
    assert check_program(code, SCENE, PARSERS) == []


# ---------------------------------------------------------------- the planner's hook
class RecordingLLM:
    """Answers in order and keeps each call's options (the grammar among them)."""

    def __init__(self, answers: list[str], mode: str) -> None:
        self.config = LLMConfig(model="m", base_url="http://127.0.0.1:1/v1", mode=mode)
        self.answers, self.options = list(answers), []

    def complete(self, prompt, **options) -> LLMReply:
        self.options.append(options)
        return LLMReply(self.answers.pop(0), "stop", None, None, 0.0, "m")


def _planner(llm, grammar: bool = True) -> CodeAsPoliciesPlanner:
    grounding = GroundingSettings(grammar=grammar, candidates=1, retrieved_examples=0)
    return CodeAsPoliciesPlanner(llm, PromptSet.load(), max_depth=1, grounding=grounding)


def test_a_completion_endpoint_decodes_main_code_helpers_and_parsers_under_the_grammar():
    answers = [
        "for b in blocks_here():\n    put_first_on_second(b, parse_obj_name('the far bowl'))",
        "    return [n for n in get_obj_names() if n.endswith('block')]\n",
        "ret_val = 'blue bowl'",
    ]
    llm = RecordingLLM(answers, "completion")
    instruction = "put the blocks in the far bowl"
    program = _planner(llm).generate(instruction, SCENE, [])
    grammars = code_grammars(SCENE, PromptSet.load().parsers, instruction=instruction)
    assert [o.get("grammar") for o in llm.options] == [
        grammars.main,
        grammars.function,
        grammars.program,
    ]
    assert "'red block'" in grammars.program and "'pink bowl'" not in grammars.program
    assert program.problems == [] and "def blocks_here" in program.code


def test_the_main_code_of_an_instruction_naming_its_objects_is_decoded_under_its_focus():
    llm = RecordingLLM(["put_first_on_second('red block', 'blue bowl')"], "completion")
    program = _planner(llm).generate("drop the red block into the blue bowl", SCENE, [])
    focused = code_grammars(SCENE, PromptSet.load().parsers, ["red block", "blue bowl"])
    assert llm.options[0]["grammar"] == focused.main != focused.program
    assert "'green block'" not in focused.main and "'green block'" in focused.program
    assert program.problems == []


def test_a_chat_endpoint_gets_no_grammar_and_the_program_is_checked_after():
    llm = RecordingLLM(["put_first_on_second('red block', 'pink bowl')"], "chat")
    program = _planner(llm).generate("put the red block in the pink bowl", SCENE, [])
    assert "grammar" not in llm.options[0]
    assert any("no 'pink bowl' on the table" in p for p in program.problems)


def test_grammar_off_changes_nothing():
    llm = RecordingLLM(["put_first_on_second('red block', 'pink bowl')"], "completion")
    program = _planner(llm, grammar=False).generate("put it in the pink bowl", SCENE, [])
    assert "grammar" not in llm.options[0] and program.problems == []


# ---------------------------------------------------------------- the real local model
@pytest.mark.llm
@pytest.mark.slow
def test_the_local_model_under_the_grammar_names_only_objects_present():
    from lang2policy.llm import make_client

    objects = ["gray block", "yellow bowl"]
    planner = _planner(make_client("local"))
    program = planner.generate("put the gray block in the pink bowl", objects, [])
    assert program.problems == [], program.code
    named = re.findall(r"'([a-z]+ (?:block|bowl))'", program.code)
    assert set(named) <= set(objects), program.code


@pytest.mark.llm
@pytest.mark.slow
def test_the_local_server_honours_a_grammar_the_model_would_not_follow():
    """The server samples grammar-first (``llm.llama_grammar_first``): tokens the grammar
    refuses are replaced by the best one it allows, so the answer is in the grammar."""
    from lang2policy.llm import make_client

    llm = make_client("local")
    prompt = "objects = ['red block', 'blue bowl']\n# put the red block in the blue bowl.\n"
    grammar = 'root ::= "say(" ("\'no\'" | "\'not now\'") ")\\n#"'
    reply = llm.complete(prompt, stop=["\n#"], max_tokens=32, grammar=grammar)
    assert reply.text in ("say('no')", "say('not now')")


def test_a_helper_the_function_prompt_defines_is_reused_without_an_llm_call():
    main = "for b in get_block_names():\n    put_first_on_second(b, matching_bowl(b))"
    llm = RecordingLLM([main], "completion")
    program = _planner(llm).generate("put the blocks in the bowls of their colour", SCENE, [])
    assert len(llm.options) == 1  # the main code only: both helpers came from the library
    assert "def get_block_names():" in program.code and "def matching_bowl(block):" in program.code
    assert program.problems == [] and program.llm_calls == 1
    # a call the library's definition does not accept is written by the LLM as before
    odd = "put_first_on_second('red block', matching_bowl('red block', 'blue'))"
    written = "    return 'blue bowl'\n"
    llm = RecordingLLM([odd, written], "completion")
    program = _planner(llm).generate("put the red block in its bowl", SCENE, [])
    assert len(llm.options) == 2 and "return 'blue bowl'" in program.code
    # the ungrounded baseline writes every helper itself
    llm = RecordingLLM([main, written, written], "completion")
    baseline = CodeAsPoliciesPlanner(
        llm, PromptSet.load(), max_depth=1, grounding=GroundingSettings.off()
    )
    assert baseline.generate("put the blocks in the bowls", SCENE, []).llm_calls == 3


def test_right_as_an_intensifier_is_no_direction(vocab):
    """'drop the red block right into the yellow bowl' once aimed at a point right of the bowl."""
    end = "\n#"
    aside = "put_first_on_second('red block', parse_position('a point right of the blue bowl'))"
    named = ["red block", "blue bowl"]
    stressed = code_grammars(SCENE, PARSERS, named, "drop the red block right into the blue bowl")
    assert rejected_at(vocab, stressed.main, aside + end) is not None
    assert (
        rejected_at(vocab, stressed.main, "put_first_on_second('red block', 'blue bowl')" + end)
        is None
    )
    beside = code_grammars(SCENE, PARSERS, named, "put the red block right of the blue bowl")
    assert rejected_at(vocab, beside.main, aside + end) is None
