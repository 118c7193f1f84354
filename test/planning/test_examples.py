"""Few-shot examples retrieved by similarity (planning/examples.py) and the planner's prompt
built from them (issue 15, item 3). Uses the bundled MiniLM embedder (CPU, offline)."""

from __future__ import annotations

import pytest

from lang2policy.llm.exchange import LLMReply
from lang2policy.planning import CodeAsPoliciesPlanner, PromptSet
from lang2policy.planning.examples import ExampleBank, ExampleRetriever
from lang2policy.planning.grounding import GroundingSettings

OBJECTS = ["red block", "green block", "yellow bowl", "blue bowl"]


@pytest.fixture(scope="module")
def retriever(prompts: PromptSet) -> ExampleRetriever:
    return ExampleRetriever(ExampleBank.parse(prompts.main))


class _FakeLLM:
    """Answers every prompt with one line and keeps the prompts."""

    config = None

    def __init__(self, answer: str = "put_first_on_second('red block', 'yellow bowl')") -> None:
        self.answer, self.prompts = answer, []

    def complete(self, prompt, **options) -> LLMReply:
        self.prompts.append(prompt)
        return LLMReply(self.answer, "stop", None, None, 0.01, "fake")


# ---------------------------------------------------------------- the bank
def test_the_bank_splits_the_main_prompt_into_its_examples(prompts: PromptSet):
    bank = ExampleBank.parse(prompts.main)
    assert len(bank.examples) == prompts.main.count("\nobjects = ")
    assert "The robot API" in bank.preamble and "objects = " not in bank.preamble
    first = bank.examples[0]
    assert first.text.startswith("objects = ['yellow block'")
    assert first.instruction == "put the yellow block in the blue bowl."
    # a multi-turn block keeps its follow-up turn, and its first instruction is what counts
    back = next(e for e in bank.examples if "now put it back." in e.text)
    assert back.instruction == "move the brown block into the cyan bowl."
    assert [e.repair for e in bank.examples].count(True) == 1
    # all examples, in order, rebuild the prompt
    assert bank.prompt(bank.examples) == prompts.main.rstrip("\n") + "\n"


# ---------------------------------------------------------------- retrieval
def test_a_pick_and_place_instruction_gets_pick_and_place_examples(retriever):
    chosen = retriever.choose("drop the green block into the yellow bowl", 3)
    assert len(chosen) == 3
    assert all("put_first_on_second(" in e.text for e in chosen)
    last = chosen[-1]  # the most similar, nearest to the instruction
    assert "bowl" in last.instruction and "corner" not in last.instruction, last.instruction
    scores = retriever.similarities("drop the green block into the yellow bowl")
    order = [retriever.bank.examples.index(e) for e in chosen]
    assert [float(scores[i]) for i in order] == sorted(float(scores[i]) for i in order)


def test_a_stacking_instruction_gets_the_stacking_example_last(retriever):
    chosen = retriever.choose("pile every block up into one stack", 3)
    assert chosen[-1].instruction.startswith("stack "), [e.instruction for e in chosen]


def test_the_repair_example_only_goes_to_repairs(retriever):
    instruction = "put the gray block in the pink bowl"  # the repair example's own words
    assert not any(e.repair for e in retriever.choose(instruction, 4))
    assert any(e.repair for e in retriever.choose(instruction, 4, repair=True))


def test_k_examples_make_a_shorter_prompt_with_the_same_shape(retriever, prompts):
    full = prompts.main
    short = retriever.prompt_for("put the red block in the blue bowl", 6)
    assert len(short) < 0.9 * len(full)
    assert short.count("\nobjects = ") == 6
    assert short.startswith(retriever.bank.preamble) and short.endswith("\n")
    assert retriever.choose("put the red block in the blue bowl", 0) == []


# ---------------------------------------------------------------- in the planner
def test_the_planner_sends_the_retrieved_examples_only_when_asked(prompts):
    llm = _FakeLLM()
    history = [
        ("put the green block in the blue bowl", "put_first_on_second('green block', 'blue bowl')")
    ]
    off = CodeAsPoliciesPlanner(llm, prompts, grounding=GroundingSettings.off())
    off.generate("put the red block in the yellow bowl", OBJECTS, history)
    on = CodeAsPoliciesPlanner(
        llm, prompts, grounding=GroundingSettings(grammar=False, retrieved_examples=4)
    )
    program = on.generate("put the red block in the yellow bowl", OBJECTS, history)
    on.generate("stack all the blocks", OBJECTS, [])
    full, grounded, stacking = llm.prompts
    assert full.startswith(prompts.main)
    # the fixed part: the preamble and every example that shows no repair, for any instruction
    bank = ExampleBank.parse(prompts.main)
    plain = [e for e in bank.examples if not e.repair]
    fixed = bank.prompt(plain)
    assert grounded.startswith(fixed) and stacking.startswith(fixed)
    assert "# error:" not in grounded
    # then four recalled examples, the most similar last, then the scene
    recalled = grounded[len(fixed) :]
    assert recalled.count("objects = ") == 4 + 1
    assert "# put the yellow block in the blue bowl." in recalled
    assert "# stack all the blocks." in stacking[len(fixed) :]
    # the same tail: scene, history, instruction
    tail = full[len(prompts.main.rstrip("\n")) :]
    assert grounded.endswith(tail) and tail.endswith("# put the red block in the yellow bowl.\n")
    assert program.main == "put_first_on_second('red block', 'yellow bowl')"


# ---------------------------------------------------------------- repair prompts
def _repair_prompt(instruction: str, objects: list[str]) -> str:
    llm = _FakeLLM()
    grounding = GroundingSettings(grammar=False, retrieved_examples=6)
    planner = CodeAsPoliciesPlanner(llm, PromptSet.load(), max_depth=0, grounding=grounding)
    failed = planner.generate(instruction, objects, [])
    planner.repair(instruction, objects, [], failed, "not done: the goal does not hold")
    return llm.prompts[-1]


def test_a_repair_of_a_motion_request_is_shown_fixes_that_move():
    """Today's failure: a re-plan copied the repair example's ``say('I see no ... bowl')``.
    For an instruction whose objects are all there, the repair prompt's examples fix a failed
    plan by moving (``repair_examples.txt``), never by only speaking."""
    prompt = _repair_prompt("drop the red block right into the blue bowl", OBJECTS)
    examples = prompt.split("objects = ")[1:-1]  # the examples before the scene's own line
    repairs = [e for e in examples if "# fix:" in e]
    assert repairs, prompt
    assert all("put_first_on_second(" in e.split("# fix:")[-1] for e in repairs)
    assert "I see no" not in prompt


def test_a_repair_for_a_missing_object_may_be_shown_the_say_fix():
    prompt = _repair_prompt("put the red block in the pink bowl", OBJECTS)  # no pink bowl
    assert "I see no pink bowl" in prompt
