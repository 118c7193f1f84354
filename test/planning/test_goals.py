"""Compound goals: what a plan is for when one relation cannot say it (``planning.goals``).

For each of the six kinds (every block into one bowl, blocks into the bowls of their colours,
one tower, a block beside an object, the blocks in a line, a block at a corner or side) the
goal is read from several phrasings of the instruction, and judged on a real MuJoCo world:
objects are set where the arrangement holds (goal reached) and where it does not (goal not
reached, with a reason that says what does not hold), or moved there by the real skills
through the sandbox. Before these goals, the weak fallback (the program's own calls) judged a
program that put one block into the wrong bowl "goal reached" for "put all the blocks in the
orange bowl": the end-to-end test at the bottom checks that the plan loop no longer does.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from lang2policy.planning.cap import GeneratedProgram
from lang2policy.planning.goals import Goal, corrected_goal, judge, state_goal
from lang2policy.planning.loop import PlanLoop
from lang2policy.sandbox.outcome import IntentRecord, PlanOutcome
from lang2policy.sandbox.policy import default_policy
from lang2policy.sandbox.runner import SandboxLimits, SandboxRunner
from lang2policy.skills.backend import SimSkillBackend
from lang2policy.skills.catalog import SKILLS
from lang2policy.skills.geometry import corner_point

OBJECTS = [
    "red block",
    "green block",
    "blue block",
    "orange bowl",
    "yellow bowl",
    "green bowl",
    "red bowl",
]
KINDS = {name: name.split()[-1] for name in OBJECTS}
BLOCKS = ("red block", "green block", "blue block")


def goal_of(instruction: str, code: str = "", objects=OBJECTS) -> Goal:
    kinds = {name: name.split()[-1] for name in objects}
    return state_goal(instruction, code, objects, kinds)


# ---------------------------------------------------------------- (a) stating the goal
ALL_IN_ORANGE = (
    "is_in('red block', 'orange bowl') and is_in('green block', 'orange bowl') and "
    "is_in('blue block', 'orange bowl')"
)


@pytest.mark.parametrize(
    "instruction",
    [
        "put all the blocks in the orange bowl",
        "put the blocks in the orange bowl",
        "gather every block inside the orange bowl",
        "collect all of the blocks into the orange bowl",
        "Put each block into the orange bowl.",
        "could you put all the blocks in the orange bowl?",
    ],
)
def test_every_block_into_one_bowl(instruction):
    # the program's own (wrong) call no longer decides the goal
    goal = goal_of(instruction, "put_first_on_second('red block', 'yellow bowl')")
    assert goal.kind == "relations" and goal.describe() == ALL_IN_ORANGE


def test_all_the_blocks_present_count_and_only_those():
    objects = ["cyan block", "red block", "brown bowl"]
    goal = goal_of("gather every block inside the brown bowl", objects=objects)
    assert (
        goal.describe() == "is_in('cyan block', 'brown bowl') and is_in('red block', 'brown bowl')"
    )


MATCHING = "is_in('red block', 'red bowl') and is_in('green block', 'green bowl')"


@pytest.mark.parametrize(
    "instruction",
    [
        "put all the blocks in the bowls with matching colors",
        "put each block in the bowl of the same colour",
        "sort the blocks into the bowls by color",
        "every block goes into the bowl that has its color",
        "put the blocks in their corresponding bowls",
    ],
)
def test_blocks_into_the_bowls_of_their_colours(instruction):
    # the blue block has no blue bowl on the table: it is not part of the goal
    goal = goal_of(instruction, "put_first_on_second('red block', 'orange bowl')")
    assert goal.kind == "relations" and goal.describe() == MATCHING


@pytest.mark.parametrize(
    "instruction",
    [
        "stack all the blocks",
        "stack the blocks on top of each other",
        "build a single tower out of all the blocks",
        "pile every block up into one stack",
    ],
)
def test_one_tower_of_all_the_blocks(instruction):
    goal = goal_of(instruction, "put_first_on_second('red block', 'green block')")
    assert goal.kind == "one_tower" and goal.objects == BLOCKS
    assert goal.describe() == "one_tower('red block', 'green block', 'blue block')"


@pytest.mark.parametrize(
    ("instruction", "described"),
    [
        (
            "put the red block to the left of the green bowl",
            "is_left_of('red block', 'green bowl')",
        ),
        (
            "place the red block to the right of the green bowl",
            "is_right_of('red block', 'green bowl')",
        ),
        ("put the red block to the top of the green bowl", "is_top_of('red block', 'green bowl')"),
        (
            "set the blue block down on the left side of the red bowl",
            "is_left_of('blue block', 'red bowl')",
        ),
        (
            "move the green block next to the orange bowl, on its right",
            "is_right_of('green block', 'orange bowl')",
        ),
        ("put the red block behind the green bowl", "is_top_of('red block', 'green bowl')"),
        ("put the red block in front of the green bowl", "is_bottom_of('red block', 'green bowl')"),
        (
            "put the red block on the far side of the blue block",
            "is_top_of('red block', 'blue block')",
        ),
    ],
)
def test_a_block_beside_an_object_is_not_read_as_into_it(instruction, described):
    # the program puts it INTO the bowl: that is not what the goal states
    goal = goal_of(instruction, "put_first_on_second('red block', 'green bowl')")
    assert goal.kind == "relations" and goal.describe() == described
    assert goal.relations[0].relation == "beside"


@pytest.mark.parametrize(
    ("instruction", "orientation"),
    [
        ("put the blocks in a horizontal line", "horizontal"),
        ("arrange the blocks in a diagonal line", "diagonal"),
        ("line up all the blocks along a vertical line", "vertical"),
        ("make a horizontal row out of the blocks", "horizontal"),
        ("put the blocks in a line", ""),
    ],
)
def test_the_blocks_in_a_line(instruction, orientation):
    goal = goal_of(instruction)
    assert goal.kind == "in_a_line" and goal.place == orientation and goal.objects == BLOCKS
    names = "'red block', 'green block', 'blue block'"
    expected = f"in_a_line({orientation!r}: {names})" if orientation else f"in_a_line({names})"
    assert goal.describe() == expected


@pytest.mark.parametrize(
    ("instruction", "described"),
    [
        ("put the red block in the top left corner", "at_corner('red block', 'top left')"),
        ("move the red block to the top side", "at_corner('red block', 'top')"),
        (
            "take the blue block over to the bottom right corner of the table",
            "at_corner('blue block', 'bottom right')",
        ),
        ("I want the red block sitting in the right side", "at_corner('red block', 'right')"),
        ("put the green block on the left side of the table", "at_corner('green block', 'left')"),
        ("put the red block in the middle of the table", "at_corner('red block', 'center')"),
        ("move the red block to the top-left corner", "at_corner('red block', 'top left')"),
    ],
)
def test_a_block_at_a_corner_or_side_of_the_table(instruction, described):
    goal = goal_of(instruction, "put_first_on_second('red block', 'green bowl')")
    assert goal.kind == "at_corner" and goal.describe() == described


@pytest.mark.parametrize(
    ("instruction", "code", "described"),
    [
        ("put the red block in the yellow bowl", "", "is_in('red block', 'yellow bowl')"),
        ("put the red block on the blue block", "", "is_on('red block', 'blue block')"),
        ("stack the red block on the green block", "", "is_on('red block', 'green block')"),
        ("put the red block on top of the green block", "", "is_on('red block', 'green block')"),
        (
            "put the block closest to the blue block on the red bowl",
            "put_first_on_second('green block', 'red bowl')",
            "is_in('green block', 'red bowl')",
        ),
        ("put the block closest to the blue block on the red bowl", "", "something_in('red bowl')"),
        ("where are the blocks?", "", "nothing to move: answer the question"),
        # ambiguous: several steps, an exception, a spot not clearly named -> today's rules
        (
            "put all the blocks in the orange bowl then stack them",
            "",
            "something_in('orange bowl')",
        ),
        (
            "put all the blocks except the red block in the orange bowl",
            "",
            "is_in('red block', 'orange bowl')",
        ),
        ("put the red block in the left corner", "", "moved('red block')"),
        ("move the red block to the left", "", "moved('red block')"),
        # "next to" is not "into" (it was read as a destination)
        ("move the red block next to the green bowl", "", "moved('red block')"),
    ],
)
def test_single_relations_and_unclear_requests_keep_todays_rules(instruction, code, described):
    assert goal_of(instruction, code).describe() == described


# ---------------------------------------------------------------- (b) judging in the world


def finished(*calls: tuple[str, dict]) -> PlanOutcome:
    """An outcome of a program that finished after the given motion calls."""
    intents = [IntentRecord(skill, args, "allowed", ok=True) for skill, args in calls]
    return PlanOutcome("ok", intents=intents)


MOVED = finished(("put_first_on_second", {"obj": "red block", "target": "green bowl"}))


def arrange(session, spots: dict[str, tuple[float, ...]], seed: int = 3):
    """A scene of exactly the objects of ``spots``, each set at (x, y) or (x, y, z) (resting
    height when z is not given), settled by the simulator."""
    world = session.world
    session.reset(seed, list(spots))
    half = world.description.objects.block_half
    for name, spot in spots.items():
        rest = half + 1e-4 if name.endswith("block") else 1e-4
        x, y, *z = spot
        world._set_object(name, x, y, z[0] if z else rest, 0.0)
    world.step_seconds(0.8)
    return world


def run(session, code: str) -> PlanOutcome:
    """``code`` run by the real sandbox and skills on the session's arm."""
    backend = SimSkillBackend(session)
    policy = default_policy(backend.description, known_skills=SKILLS)
    outcome = SandboxRunner(backend, policy, limits=SandboxLimits(wall_seconds=60)).run(code)
    assert outcome.ok, outcome.headline()
    return outcome


def verdict(session, instruction: str, outcome: PlanOutcome = MOVED):
    world = session.world
    goal = state_goal(instruction, "", world.object_names(), {})
    return judge(goal, outcome, world, {})


def test_all_in_one_bowl_needs_every_block_in_it(session):
    instruction = "put all the blocks in the orange bowl"
    spots = {
        "red block": (0.20, 0.10 + 0.015),
        "green block": (0.16, -0.12),
        "orange bowl": (0.20, 0.10),
        "yellow bowl": (0.24, -0.10),
    }
    arrange(session, spots)
    missed = verdict(session, instruction)
    assert missed.verdict == "goal_not_reached"
    assert missed.unmet == ["is_in('green block', 'orange bowl')"]
    assert "is_in('green block', 'orange bowl') does not hold" in missed.reason
    arrange(session, {**spots, "green block": (0.20, 0.10 - 0.015)})
    assert verdict(session, instruction).verdict == "goal_reached"


def test_matching_colours_need_each_block_in_its_own_bowl(session):
    instruction = "sort the blocks into the bowls by color"
    spots = {
        "red block": (0.15, 0.12),
        "green block": (0.26, -0.06),  # in the yellow bowl
        "red bowl": (0.15, 0.12),
        "green bowl": (0.15, -0.12),
        "yellow bowl": (0.26, -0.06),
    }
    arrange(session, spots)
    wrong = verdict(session, instruction)
    assert wrong.verdict == "goal_not_reached"
    assert wrong.unmet == ["is_in('green block', 'green bowl')"]
    arrange(session, {**spots, "green block": (0.15, -0.12)})
    assert verdict(session, instruction).verdict == "goal_reached"


def test_one_put_is_no_tower_of_all_the_blocks(session):
    spots = {"red block": (0.22, 0.10), "green block": (0.16, -0.10), "blue block": (0.20, -0.02)}
    arrange(session, spots)
    one_put = run(session, "put_first_on_second('green block', 'blue block')")
    world = session.world
    assert world.is_on("green block", "blue block")  # the put worked, but one block is left
    missed = verdict(session, "stack all the blocks", one_put)
    assert missed.verdict == "goal_not_reached"
    assert missed.unmet == ["one_tower('red block', 'green block', 'blue block')"]
    assert "no single tower" in missed.reason and "red block" in missed.reason


def test_three_blocks_one_on_another_are_one_tower(session):
    half = 0.0125
    x, y = 0.20, -0.05
    spots = {
        "blue block": (x, y, half + 1e-4),
        "green block": (x, y, 3 * half + 3e-4),
        "red block": (x, y, 5 * half + 5e-4),
        "yellow bowl": (0.20, 0.12),
    }
    arrange(session, spots)
    assert verdict(session, "build a single tower out of all the blocks").verdict == "goal_reached"
    # the top block beside the tower: two towers, not one
    arrange(session, {**spots, "red block": (0.15, 0.0)})
    split = verdict(session, "stack the blocks on top of each other")
    assert split.verdict == "goal_not_reached"
    # both lie on the table: which one counts as the lowest depends on a hair of height
    assert re.search(
        r"the (red|blue) block is not on the (blue|red) block: no single tower", split.reason
    )


def test_a_block_put_into_the_bowl_is_not_to_the_left_of_it(session):
    instruction = "put the red block to the left of the green bowl"
    spots = {"red block": (0.16, -0.10), "green bowl": (0.21, 0.03), "blue block": (0.26, -0.12)}
    arrange(session, spots)
    into = run(session, "put_first_on_second('red block', 'green bowl')")
    world = session.world
    assert world.is_in("red block", "green bowl")
    # what the program's own call aims at (the old fallback) holds; the request does not
    assert (
        judge(
            goal_of(
                "tidy up", "put_first_on_second('red block', 'green bowl')", world.object_names()
            ),
            into,
            world,
            {},
        ).verdict
        == "goal_reached"
    )
    missed = verdict(session, instruction, into)
    assert missed.verdict == "goal_not_reached"
    assert missed.unmet == ["is_left_of('red block', 'green bowl')"]
    assert "the red block is not lying on the table (it is in the bowl)" in missed.reason


@pytest.mark.parametrize(
    ("offset", "reached", "why"),
    [
        ((0.0, 0.042 + 0.0275), True, ""),  # left = +y, just past the rim
        ((0.0, -0.07), False, "is not to the left of the green bowl"),  # on its right
        ((0.0, 0.15), False, "too far"),
        ((0.06, 0.06), False, "off to the side"),
    ],
)
def test_beside_a_bowl_holds_only_next_to_it_on_that_side(session, offset, reached, why):
    bowl = np.array([0.19, 0.0])
    spots = {"red block": tuple(bowl + offset), "green bowl": tuple(bowl)}
    arrange(session, spots)
    result = verdict(session, "set the red block down on the left side of the green bowl")
    assert result.verdict == ("goal_reached" if reached else "goal_not_reached"), result.reason
    assert why in result.reason


def test_beside_a_block_uses_the_blocks_footprint(session):
    spots = {"red block": (0.20 + 0.035, 0.0), "blue block": (0.20, 0.0)}  # top = +x
    arrange(session, spots)
    assert verdict(session, "put the red block behind the blue block").verdict == "goal_reached"
    bottom = verdict(session, "put the red block in front of the blue block")
    assert bottom.verdict == "goal_not_reached" and "is_bottom_of" in bottom.reason


def _line_spots(world, direction, count=3, step=4.4):
    centre = corner_point(world.description, "center")[:2]
    half = world.description.objects.block_half
    unit = np.array(direction) / np.linalg.norm(direction)
    return [tuple(centre + unit * step * half * (i - (count - 1) / 2)) for i in range(count)]


@pytest.mark.parametrize(
    ("direction", "instruction", "reached"),
    [
        ((1.0, 0.0), "line up all the blocks along a vertical line", True),
        ((0.0, 1.0), "put the blocks in a horizontal line", True),
        ((1.0, 1.0), "arrange the blocks in a diagonal line", True),
        ((1.0, 0.0), "make a horizontal row out of the blocks", False),
        ((0.0, 1.0), "arrange the blocks in a diagonal line", False),
        ((1.0, 1.0), "put the blocks in a line", True),
    ],
)
def test_blocks_in_a_line_of_the_named_orientation(session, direction, instruction, reached):
    world = session.world
    spots = dict(zip(BLOCKS, _line_spots(world, direction), strict=True))
    arrange(session, {**spots, "orange bowl": (0.14, -0.15)})
    result = verdict(session, instruction)
    assert result.verdict == ("goal_reached" if reached else "goal_not_reached"), result.reason
    if not reached:
        assert "deg from left-right: not" in result.reason


def test_blocks_off_the_line_or_touching_are_not_a_line(session):
    world = session.world
    spots = dict(zip(BLOCKS, _line_spots(world, (0.0, 1.0)), strict=True))
    x, y = spots["green block"]
    arrange(session, {**spots, "green block": (x + 0.04, y)})
    crooked = verdict(session, "put the blocks in a horizontal line")
    assert crooked.verdict == "goal_not_reached"
    assert "not in a line: a block is" in crooked.reason and "cm off it" in crooked.reason
    tight = dict(zip(BLOCKS, _line_spots(world, (0.0, 1.0), step=2.0), strict=True))
    arrange(session, tight)
    touching = verdict(session, "put the blocks in a horizontal line")
    assert touching.verdict == "goal_not_reached" and "two blocks touch" in touching.reason


@pytest.mark.parametrize(
    ("instruction", "corner", "reached"),
    [
        ("put the red block in the top left corner", "top left", True),
        ("move the red block to the top side", "top", True),
        ("take the red block over to the bottom right corner of the table", "bottom right", True),
        ("I want the red block sitting in the right side", "left", False),
        ("put the red block in the top left corner", "bottom left", False),
    ],
)
def test_a_block_at_a_corner_or_side(session, instruction, corner, reached):
    world = session.world
    spot = corner_point(world.description, corner)[:2]
    arrange(session, {"red block": tuple(spot), "green bowl": (0.20, 0.0)})
    result = verdict(session, instruction)
    assert result.verdict == ("goal_reached" if reached else "goal_not_reached"), result.reason
    if not reached:
        assert "the red block is" in result.reason and "cm from the" in result.reason


def test_a_block_lifted_off_the_table_is_not_at_the_corner(session):
    world = session.world
    spot = corner_point(world.description, "top left")
    arrange(session, {"red block": (spot[0], spot[1]), "blue block": (0.20, 0.0)})
    world._set_object("red block", spot[0], spot[1], 0.08, 0.0)  # held in the air
    world.step(1)
    result = verdict(session, "put the red block in the top left corner")
    assert result.verdict == "goal_not_reached"
    assert "the red block is not lying on the table" in result.reason


def test_compound_goals_stay_when_the_person_edits_a_call():
    goal = goal_of("put all the blocks in the orange bowl")
    edited = finished(("put_first_on_second", {"obj": "red block", "target": "yellow bowl"}))
    assert corrected_goal(goal, edited, OBJECTS, KINDS) == goal
    single = goal_of("put the red block in the orange bowl")
    assert corrected_goal(single, edited, OBJECTS, KINDS).describe() == (
        "is_in('red block', 'yellow bowl')"
    )


def test_goals_stay_frozen_and_hashable():
    goals = {goal_of("stack all the blocks"), goal_of("put the red block in the top left corner")}
    assert len(goals) == 2 and goal_of("stack all the blocks") in goals
    with pytest.raises(AttributeError):
        goal_of("stack all the blocks").place = "top"


# ---------------------------------------------------------------- (c) in the plan loop
class ScriptedPlanner:
    """Stands in for the LLM planner: the same programs in order, first and repaired."""

    def __init__(self, programs: list[str]) -> None:
        self.programs = list(programs)
        self.feedback: list[str] = []

    def _next(self) -> GeneratedProgram:
        code = self.programs.pop(0) if len(self.programs) > 1 else self.programs[0]
        return GeneratedProgram(code=code, main=code)

    def generate(self, instruction, objects, history):
        return self._next()

    def repair(self, instruction, objects, history, program, feedback):
        self.feedback.append(feedback)
        return self._next()


BOTH_INTO_ORANGE = """
bowl = 'orange bowl'
for i, block in enumerate(['red block', 'green block']):
    centre = get_obj_pos(bowl)
    across = np.array([-centre[1], centre[0], 0.0]) / np.linalg.norm(centre[:2])
    put_first_on_second(block, centre + across * 0.016 * (1 if i else -1))
go_home()
"""


def test_the_plan_loop_no_longer_reports_a_wrong_bowl_as_done(session):
    """The issue's case: for "put all the blocks in the orange bowl" a program that put only
    the red block into the yellow bowl was "goal reached" (its own call's relation). The
    instruction reader now plans the request itself; a wrong program for a request it cannot
    read ("the orange one") is still judged by the goal the words state."""
    arrange(
        session,
        {
            "red block": (0.16, 0.10),
            "green block": (0.15, -0.12),
            "orange bowl": (0.23, 0.05),
            "yellow bowl": (0.24, -0.10),
        },
    )
    backend = SimSkillBackend(session)
    policy = default_policy(backend.description, known_skills=SKILLS)
    runner = SandboxRunner(backend, policy, limits=SandboxLimits(wall_seconds=60))
    planner = ScriptedPlanner(["put_first_on_second('red block', 'yellow bowl')", BOTH_INTO_ORANGE])
    loop = PlanLoop(planner, runner, backend)
    result = loop.handle("put all the blocks in the orange bowl")
    world = session.world
    assert planner.feedback == [] and result.program.llm_calls == 0  # the reader planned it
    assert result.verdict.goal.describe() == (
        "is_in('red block', 'orange bowl') and is_in('green block', 'orange bowl')"
    )
    assert result.verdict.verdict == "goal_reached", result.verdict.reason
    assert world.is_in("red block", "orange bowl") and world.is_in("green block", "orange bowl")


def test_a_block_resting_on_a_block_in_the_bowl_is_in_the_bowl(session):
    """Two blocks put in one bowl often end up one on the other: both are in it."""
    instruction = "put all the blocks in the orange bowl"
    half = session.world.description.objects.block_half
    spots = {
        "red block": (0.20, 0.10),
        "green block": (0.20, 0.10, 3.2 * half + 0.004),  # dropped on the red block
        "orange bowl": (0.20, 0.10),
        "yellow bowl": (0.24, -0.10),
    }
    world = arrange(session, spots)
    assert world.is_on("green block", "red block") and not world.is_in("green block", "orange bowl")
    assert verdict(session, instruction).verdict == "goal_reached"
    arrange(session, {**spots, "red block": (0.16, -0.12), "green block": (0.16, -0.12, 0.04)})
    assert verdict(session, instruction).verdict == "goal_not_reached"  # a tower beside it
