"""The Code-as-Policies planner end to end: recorded LLM exchanges drive the planner, every
program runs through the real sandbox on the simulated SO-101, and the simulator judges.

The exchanges in test/fixtures/llm/cap_*.jsonl were recorded from the local Gemma 3 270M by
running this file as a script (``python test/planning/test_cap.py record``), which plays the
scenarios below through the same code path as the tests. Answers that the real model would not
give are written by hand as recorded exchanges (their response's ``model`` is "hand-written");
each scenario says which. A change to config/prompts/cap/ or to the skill catalog's docs changes
the requests, so the fixtures must then be recorded again.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from lang2policy.llm import LLMReply, build_request, make_client
from lang2policy.planning import (
    CodeAsPoliciesPlanner,
    PlanLoop,
    PromptSet,
    clean_code,
    undefined_calls,
)
from lang2policy.planning.codegen import parameter_names, parser_function
from lang2policy.sandbox.policy import default_policy
from lang2policy.sandbox.runner import SandboxLimits, SandboxRunner
from lang2policy.session.sim import SimSession
from lang2policy.skills.backend import SimSkillBackend

FIXTURES = Path(__file__).parents[1] / "fixtures" / "llm"
OBJECTS = ["red block", "blue block", "blue bowl", "green bowl"]
SEED = 1
LIMITS = SandboxLimits(wall_seconds=5, cpu_seconds=5, memory_mb=512)


@dataclass(frozen=True)
class Scenario:
    """Instructions handled in order by one planning session; ``hand_written`` maps the index
    of an LLM call (0-based, over the whole scenario) to the answer written by hand."""

    instructions: tuple[str, ...]
    objects: tuple[str, ...] = tuple(OBJECTS)
    hand_written: dict[int, str] = field(default_factory=dict)
    max_depth: int = 2


SCENARIOS = {
    # All answers from the real model.
    "cap_session": Scenario(("put the red block in the blue bowl", "now put it back")),
    # All answers from the real model: its program calls get_block_names(), which nobody
    # defined, and the function-writing prompt writes it.
    "cap_hierarchical": Scenario(
        ("put the blocks in the bowls with matching colors",),
        objects=("red block", "red bowl", "green bowl"),
    ),
    # Hand-written: the 270M model does not call parsing sub-prompts, nor write helpers that
    # call further undefined helpers. Calls: 0 main, 1 place_gently (depth 1), 2 the
    # parse_obj_name sub-prompt, 3 gentle_speed (depth 2, called by place_gently).
    "cap_nested": Scenario(
        ("put the block closest to the green bowl in the blue bowl",),
        hand_written={
            0: "target = 'blue bowl'\n"
            "block = parse_obj_name('the block closest to the green bowl')\n"
            "place_gently(block, target)\n",
            1: "    put_first_on_second(block, target, speed=gentle_speed())\n",
            2: "blocks = [name for name in get_obj_names() if name.endswith('block')]\n"
            "bowl_pos = get_obj_pos('green bowl')\n"
            "ret_val = min(blocks, key=lambda name: "
            "np.linalg.norm(get_obj_pos(name)[:2] - bowl_pos[:2]))\n",
            3: "    return 0.08\n",
        },
    ),
    # Hand-written: bad answers, and a repair answer that is just as bad (calls 2k, 2k+1).
    "cap_bad_answers": Scenario(
        (
            "put the red block in the blue bowl, please",
            "red block into the blue bowl",
            "put the red block in the blue bowl at 0.5 m/s",
        ),
        hand_written={
            0: "Sure! I will put the red block in the blue bowl for you.",
            1: "I am sorry, I cannot help with that.",
            2: "put_first_on_second('red block', 'blue bowl'",
            3: "put_first_on_second('red block', 'blue bowl'",
            4: "put_first_on_second('red block', 'blue bowl', speed=0.5)",
            5: "put_first_on_second('red block', 'blue bowl', speed=0.4)",
        },
    ),
    # Hand-written: the real model leaves the speed out of the first answer, and its repair
    # answer copies the prompt's repair example (it says "I see no blue bowl") instead of
    # lowering the speed.
    "cap_repair": Scenario(
        ("put the blue block in the green bowl at 0.5 m/s",),
        hand_written={
            0: "put_first_on_second('blue block', 'green bowl', speed=0.5)",
            1: "put_first_on_second('blue block', 'green bowl', speed=0.25)",
        },
    ),
}


# ---------------------------------------------------------------- helpers


def planning_session(session: SimSession, scenario: Scenario, llm) -> PlanLoop:
    session.reset(SEED, list(scenario.objects))
    backend = SimSkillBackend(session)
    runner = SandboxRunner(backend, default_policy(session.world.description), limits=LIMITS)
    planner = CodeAsPoliciesPlanner(llm, max_depth=scenario.max_depth)
    return PlanLoop(planner, runner, backend)


def replay(name: str):
    return make_client(f"replay:{FIXTURES / name}.jsonl")


def recorded_prompts(name: str) -> list[str]:
    lines = (FIXTURES / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["request"]["prompt"] for line in lines if line.strip()]


def joints(session: SimSession) -> np.ndarray:
    return session.robot.get_observation().position.copy()


def xy(session: SimSession, name: str) -> np.ndarray:
    return session.world.object_pose(name).position[:2].copy()


def settle(session: SimSession) -> None:
    session.world.step_seconds(0.5)


# ---------------------------------------------------------------- pieces, no LLM
def test_undefined_calls_skip_skills_builtins_numpy_and_everything_bound():
    source = (
        "import math\n"
        "def helper(x):\n    return x\n"
        "f = len\n"
        "for block in get_block_names():\n"
        "    put_first_on_second(block, matching_bowl(block))\n"
        "print(sorted([np.abs(-1), math.sqrt(4), helper(1), f([])]))\n"
        "get_block_names()\n"
        "open('x')\n"
    )
    assert undefined_calls(source) == ["get_block_names", "matching_bowl"]
    assert undefined_calls("put_first_on_second(") == []  # the sandbox reports syntax errors
    assert parameter_names(source, "matching_bowl") == ["block"]
    assert parameter_names("f('a', 2, speed=1)", "f") == ["arg1", "arg2", "speed=None"]


def test_answers_are_cleaned_of_fences_indentation_and_echoed_comments():
    answer = "```python\n    put_first_on_second('red block', 'blue bowl')\n```\n"
    assert clean_code(answer) == "put_first_on_second('red block', 'blue bowl')"
    assert clean_code("# error: the program does not parse.\n# fix: x.\nsay('hi')") == "say('hi')"
    assert clean_code("# error: the program does not parse.\n") == ""


def test_prompts_come_from_files_with_the_api_generated_from_the_skills():
    prompts = PromptSet.load()
    assert "def put_first_on_second(obj: str, target: str | np.ndarray" in prompts.main
    assert "{api}" not in prompts.main and "{api}" not in prompts.function
    assert "\n# put the yellow block in the blue bowl.\n" in prompts.main
    assert set(prompts.parsers) == {"parse_obj_name", "parse_position"}
    shared = prompts.main.index("# Programs.")  # prompts share their header: one cached prefix
    assert prompts.function[:shared] == prompts.main[:shared]


def test_a_parser_function_refuses_descriptions_it_was_not_planned_for():
    source = parser_function("parse_obj_name", {"the left block": "ret_val = 'red block'"})
    namespace: dict = {}
    exec(compile(source, "<test>", "exec"), namespace)
    assert namespace["parse_obj_name"]("the left block") == "red block"
    with pytest.raises(ValueError, match="only descriptions written as literal strings"):
        namespace["parse_obj_name"]("the right block")


# ---------------------------------------------------------------- replayed end to end
def test_replayed_plan_puts_the_block_in_the_bowl_and_a_follow_up_uses_history(session):
    planned = planning_session(session, SCENARIOS["cap_session"], replay("cap_session"))
    start = xy(session, "red block")
    statuses: list[str] = []
    first = planned.handle("put the red block in the blue bowl", on_status=statuses.append)
    settle(session)
    assert first.ok and first.attempts == 1, first.outcome.summary()
    assert session.world.is_in("red block", "blue bowl")
    assert first.program.main == "put_first_on_second('red block', 'blue bowl')"
    assert first.program.llm_calls == 1 and first.first_outcome is None
    assert statuses[0].startswith("planning") and statuses[-1].startswith("done")
    assert planned.history[0][0] == "put the red block in the blue bowl"
    assert "# (the red block was at [" in planned.history[0][1]

    second = planned.handle("now put it back")
    settle(session)
    assert second.ok, second.outcome.summary()
    follow_up_prompt = recorded_prompts("cap_session")[1]
    tail = follow_up_prompt[follow_up_prompt.rindex("objects = ") :]
    objects = session.world.object_names()
    assert tail.startswith(f"objects = {objects!r}\n# put the red block in the blue bowl.\n")
    assert "# (the red block was at [" in tail and tail.endswith("# now put it back.\n")
    assert not session.world.is_in("red block", "blue bowl")
    assert np.linalg.norm(xy(session, "red block") - start) < 0.03
    assert len(planned.history) == 2
    json.dumps(second.as_dict())  # reports are JSON-able


def test_the_hierarchical_generator_writes_the_function_the_program_left_undefined(session):
    # The planner itself: the plan loop's instruction reader plans matching colours without
    # the LLM now (test_instruction_reader), so the generator is asked directly.
    scenario = SCENARIOS["cap_hierarchical"]
    planned = planning_session(session, scenario, replay("cap_hierarchical"))
    objects = list(session.world.object_names())
    program = planned.planner.generate(scenario.instructions[0], objects, [])
    outcome = planned.runner.run(program.code)
    settle(session)
    assert "get_block_names" in program.functions, program.code
    assert "def get_block_names" not in program.main
    assert program.code.index("def get_block_names") < program.code.index(program.main)
    assert program.llm_calls == 1 + len(program.functions) and program.unresolved == []
    assert outcome.ok, outcome.summary()
    assert session.world.is_in("red block", "red bowl")


def test_functions_are_generated_recursively_up_to_the_depth_limit(session):
    scenario = SCENARIOS["cap_nested"]
    planned = planning_session(session, scenario, replay("cap_nested"))
    world = session.world
    green = world.object_pose("green bowl").position[:2]
    closest = min(("red block", "blue block"), key=lambda b: np.linalg.norm(xy(session, b) - green))
    result = planned.handle(scenario.instructions[0])
    settle(session)
    program = result.program
    assert list(program.functions) == ["place_gently", "parse_obj_name", "gentle_speed"]
    assert program.llm_calls == 4 and program.unresolved == []
    assert result.ok, result.outcome.summary()
    assert world.is_in(closest, "blue bowl")
    assert result.outcome.intents[-1].args["speed"] == 0.08

    shallow = CodeAsPoliciesPlanner(replay("cap_nested"), max_depth=1)
    cut = shallow.generate(scenario.instructions[0], list(world.object_names()), [])
    assert list(cut.functions) == ["place_gently", "parse_obj_name"]
    assert cut.unresolved == ["gentle_speed"] and cut.llm_calls == 3


@pytest.mark.parametrize(
    ("index", "first_kind", "final_kind"),
    [(0, "syntax", "syntax"), (1, "syntax", "syntax"), (2, "denied", "denied")],
    ids=["not-code", "syntax-error", "denied-intent"],
)
def test_a_bad_answer_gives_a_clear_outcome_and_a_still_arm(session, index, first_kind, final_kind):
    scenario = SCENARIOS["cap_bad_answers"]
    planned = planning_session(session, scenario, replay("cap_bad_answers"))
    before, block = joints(session), xy(session, "red block")
    result = planned.handle(scenario.instructions[index])
    settle(session)
    assert (result.first_outcome.kind, result.outcome.kind) == (first_kind, final_kind)
    assert result.attempts == 2 and not result.ok
    assert result.outcome.message and result.outcome.feedback()
    assert np.abs(joints(session)[:-1] - before[:-1]).max() < 0.02
    assert np.linalg.norm(xy(session, "red block") - block) < 0.005
    assert planned.history == []


def test_the_repair_attempt_quotes_the_feedback_and_fixes_the_program(session):
    scenario = SCENARIOS["cap_repair"]
    planned = planning_session(session, scenario, replay("cap_repair"))
    result = planned.handle(scenario.instructions[0])
    settle(session)
    assert result.attempts == 2 and result.first_outcome.kind == "denied"
    assert result.ok, result.outcome.summary()
    assert session.world.is_in("blue block", "green bowl")
    repair_prompt = recorded_prompts("cap_repair")[1]
    quoted = result.first_outcome.feedback().splitlines()[0]
    assert f"\n# error: {quoted}\n" in repair_prompt
    assert repair_prompt.endswith("# fix: put the blue block in the green bowl at 0.5 m/s.\n")


def test_an_llm_failure_is_an_outcome_and_nothing_moves(session):
    planned = planning_session(session, SCENARIOS["cap_session"], replay("cap_session"))
    before = joints(session)
    result = planned.handle("juggle the bowls")
    settle(session)
    assert result.program is None and result.attempts == 1
    assert result.outcome.kind == "rejected" and not result.outcome.intents
    assert "no program was run: the LLM call failed (ReplayMissError)" in result.outcome.message
    assert np.abs(joints(session)[:-1] - before[:-1]).max() < 0.02


def test_an_llm_failure_during_the_repair_keeps_the_first_outcome(session, tmp_path):
    first_exchange = (FIXTURES / "cap_bad_answers.jsonl").read_text().splitlines()[0]
    (tmp_path / "first_only.jsonl").write_text(first_exchange + "\n")
    scenario = SCENARIOS["cap_bad_answers"]
    client = make_client(f"replay:{tmp_path}/first_only.jsonl")
    planned = planning_session(session, scenario, client)
    result = planned.handle(scenario.instructions[0])
    assert result.attempts == 2 and result.first_outcome.kind == "syntax"
    assert result.outcome.kind == "rejected" and result.program is not None
    assert result.outcome.message.startswith("no repair was run after: syntax at line 1")


# ---------------------------------------------------------------- the real model
@pytest.mark.llm
@pytest.mark.slow
def test_the_local_model_plans_and_the_block_ends_in_the_bowl(session):
    planned = planning_session(session, SCENARIOS["cap_session"], make_client("local"))
    result = planned.handle("put the red block in the blue bowl")
    settle(session)
    print(f"\n{result.program.code}\n{result.program.llm_seconds:.1f} s in the LLM")
    assert result.ok, result.outcome.summary()
    assert session.world.is_in("red block", "blue bowl")


# ---------------------------------------------------------------- recording the fixtures
class _Recorder:
    """The local model with every exchange appended to a fixture; answers the scenario writes
    by hand are stored as if the model had given them (response model "hand-written")."""

    def __init__(self, path: Path, hand_written: dict[int, str]) -> None:
        self.live = make_client(f"record:{path}")
        self.config, self.hand_written, self.calls = self.live.config, hand_written, 0

    def complete(self, prompt, *, stop=None, max_tokens=None, temperature=None) -> LLMReply:
        index, self.calls = self.calls, self.calls + 1
        if index not in self.hand_written:
            return self.live.complete(
                prompt, stop=stop, max_tokens=max_tokens, temperature=temperature
            )
        request = build_request(
            self.config, prompt, stop=stop, max_tokens=max_tokens, temperature=temperature
        )
        reply = LLMReply(self.hand_written[index], "stop", None, None, 0.0, "hand-written")
        self.live.cache.put(request, reply)
        return reply


def record(names: list[str]) -> None:
    sim = SimSession("so101")
    for name in names or list(SCENARIOS):
        scenario, path = SCENARIOS[name], FIXTURES / f"{name}.jsonl"
        path.unlink(missing_ok=True)
        session = planning_session(sim, scenario, _Recorder(path, scenario.hand_written))
        for instruction in scenario.instructions:
            result = session.handle(instruction)
            print(f"--- {name}: {instruction!r} -> {result.outcome.headline()}")
            print(result.program.code if result.program else "(no program)")
            settle(sim)
            print("relations:", [" ".join(r) for r in sim.world.relations()])
            if len(scenario.instructions) > 1 and name == "cap_bad_answers":
                sim.reset(SEED, list(scenario.objects))


if __name__ == "__main__":
    if sys.argv[1:2] != ["record"]:
        sys.exit("usage: python test/planning/test_cap.py record [SCENARIO ...]")
    record(sys.argv[2:])
