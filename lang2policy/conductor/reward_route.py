"""The reward route: an instruction becomes a reward spec (Language to Rewards) and runs.

``RewardRoute`` keeps one ``RewardPlanner`` per set of objects (a new set of objects is a new
scene: a new planner, and no running spec), plans each instruction with the running spec as
context (so "higher" edits it), and runs the spec on its ``RewardExecutor``. Once the spec's
task has ended (done, failed, timed out), only a correction's words ("higher", "slower") edit
it; any other instruction is a new task.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from lang2policy.conductor.ports import Positions, RewardExecutor, RewardRun
from lang2policy.corrections import classify
from lang2policy.corrections.memory import EDIT_KINDS
from lang2policy.errors import Lang2PolicyError
from lang2policy.rewards.spec import RewardSpec

PlannerFactory = Callable[[Sequence[str] | Positions], Any]  # -> a RewardPlanner


class RewardRoute:
    """Plans reward specs and runs them; ``running`` is the spec a correction edits."""

    def __init__(self, executor: RewardExecutor, make_planner: PlannerFactory) -> None:
        self.executor = executor
        self.make_planner = make_planner
        self.running: RewardSpec | None = None
        # The running spec's task ended (its verdict came: done, failed, timed out): a new
        # instruction is a new task, not an edit of it; a correction still edits it.
        self.finished = False
        self._planner = None
        self._objects: frozenset[str] = frozenset()

    def planner_for(self, objects: Sequence[str] | Positions):
        """The reward planner for the scene's objects (a new one, and no running spec, when
        the set of objects changed)."""
        names = frozenset(objects)
        if self._planner is None or names != self._objects:
            if self._planner is not None:
                self.running = None
            self._planner = self.make_planner(objects)
            self._objects = names
        return self._planner

    def plan(
        self,
        instruction: str,
        objects: Sequence[str],
        positions: Positions,
        headings: Mapping[str, float],
    ):
        """Plan ``instruction`` against the running spec; positions and headings (degrees) of
        the objects when they are known."""
        planner = self.planner_for(dict(positions) if positions else list(objects))
        return planner.plan(
            instruction,
            self.running if self._edits_running(instruction, objects) else None,
            positions=dict(positions) or None,
            headings=dict(headings) or None,
        )

    def _edits_running(self, instruction: str, objects: Sequence[str]) -> bool:
        """Whether ``instruction`` may be planned as an edit of the last spec: while its task
        runs, or after it ended when the words are a correction of it ("higher", "slower",
        "no, the blue one"); a whole new request after it ended is a new task."""
        if self.running is None or not self.finished:
            return self.running is not None
        try:
            return classify(instruction, list(objects)).kind in EDIT_KINDS
        except Lang2PolicyError:
            return False

    def run(self, spec: RewardSpec, on_line: Callable[[str], None]) -> RewardRun:
        """Run ``spec`` on the executor until it ends; it is the running spec from the start
        (what a correction edits, what a stop cancels while the executor waits)."""
        self.running, self.finished = spec, False
        try:
            return self.executor.run(spec, on_line)
        finally:
            self.finished = True

    def swap(self, spec: RewardSpec) -> None:
        """A correction edited the running spec: hand the edited one to the executor."""
        self.executor.run(spec, lambda _line: None)
        self.running = spec

    def cancel(self) -> bool:
        """End the running reward task; False when none ran."""
        if self.running is None:
            return False
        self.executor.cancel()
        self.running = None
        return True
