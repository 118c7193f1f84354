"""After a reward task ends, a new request is a new task; only a correction's words edit it.

The issue's case: "move the gripper slowly above the yellow bowl", typed after a lift had
timed out, was planned as an edit of the lift. The executor here ends each spec at once (the
controller node's verdict is covered by conductor/test_reward_outcome.py); the planner records the
running spec it was given, which is what decides edit or new task.
"""

from __future__ import annotations

from lang2policy.conductor.ports import RewardRun
from lang2policy.conductor.reward_route import RewardRoute
from lang2policy.rewards.spec import validate_spec

OBJECTS = ["red block", "yellow bowl"]


class EndsAtOnce:
    def run(self, spec, on_line):
        return RewardRun(False, {"outcome": "timeout"})

    def cancel(self):
        pass


class Recording:
    def __init__(self) -> None:
        self.given: list[tuple[str, object]] = []

    def plan(self, instruction, current=None, *, positions=None, headings=None):
        self.given.append((instruction, current))
        return instruction


def spec(task: str):
    terms = [{"term": "object_height", "params": {"object": "red block", "height": 0.1}}]
    return validate_spec({"task": task, "terms": terms}, OBJECTS).spec


def test_after_a_task_ends_only_corrections_edit_it():
    planner = Recording()
    route = RewardRoute(EndsAtOnce(), lambda objects: planner)
    lift = spec("lift the red block 10 cm")
    route.running = lift  # a correction arriving while it runs edits it
    route.plan("higher", OBJECTS, {}, {})
    route.run(lift, lambda line: None)  # ... it timed out
    route.plan("move the gripper slowly above the yellow bowl", OBJECTS, {}, {})
    route.plan("higher", OBJECTS, {}, {})
    route.plan("no, the yellow bowl", OBJECTS, {}, {})
    assert [current is lift for _, current in planner.given] == [True, False, True, True]
