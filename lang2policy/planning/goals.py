"""What a code plan is for, and whether it got there: the success condition and the verdict.

The planner states a ``Goal`` with each plan (Inner Monologue style), before the arm moves:

* the **relation** the person asked for, read from the instruction: "put the red block in the
  yellow bowl" -> ``is_in('red block', 'yellow bowl')``; "stack the red block on the green
  block" -> ``is_on('red block', 'green block')``;
* else the relations the program's own ``put_first_on_second`` calls aim at (when they name
  objects: the goal the program states);
* else, for an instruction that asks for motion, that the named objects (or the arm) move;
* for a question, nothing to move: the plan answers.

After the run, ``judge`` reads the simulator state (or the graph's mirror) and gives the honest
verdict: ``goal_reached``, ``goal_not_reached`` (it finished, but the world does not show the
goal; a program that only ``say``s for a motion instruction lands here), ``answered``,
``refused`` (the privilege policy said no) or ``failed``. Only ``goal_reached`` and
``answered`` count as success.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from lang2policy.planning.route import is_question
from lang2policy.sandbox.outcome import PlanOutcome
from lang2policy.text_quote import one_line

SUCCESS_VERDICTS = ("goal_reached", "answered")
VERDICTS = ("goal_reached", "goal_not_reached", "answered", "refused", "failed")
_PUT = "put_first_on_second"
MOVED_METRES = 0.02  # an object whose centre moved farther than this (x, y) was moved
_INTO = re.compile(r"\b(in|into|inside|onto|on|on top of|to|in to|on to)\s+(the\s+)?$")
# Words that make a named object a reference ("the block closest to the green bowl"), not the
# thing to move.
_REFERRING = re.compile(
    r"\b(closest|nearest|farthest|furthest|near|next|beside|behind|left|right|of|from|by|"
    r"with|than|to)\b"
)


@dataclass(frozen=True)
class Relation:
    """``a`` in (bowl) or on (block) ``b``."""

    a: str
    relation: str  # "in" | "on"
    b: str

    def __str__(self) -> str:
        return f"is_{self.relation}({self.a!r}, {self.b!r})"


@dataclass(frozen=True)
class Goal:
    """The success condition of one plan."""

    kind: str  # "relations" | "into" | "moved" | "answer"
    relations: tuple[Relation, ...] = ()
    moved: tuple[str, ...] = ()  # "moved": objects that must move (empty: the arm);
    # "into": the destination something must arrive in or on

    def describe(self) -> str:
        if self.kind == "relations":
            return " and ".join(str(r) for r in self.relations)
        if self.kind == "answer":
            return "nothing to move: answer the question"
        if self.kind == "into":
            return f"something_in({self.moved[0]!r})"
        what = ", ".join(repr(n) for n in self.moved) or "the arm"
        return f"moved({what})"


@dataclass
class Verdict:
    """How a plan ended, judged by its goal in the world."""

    verdict: str  # one of VERDICTS
    goal: Goal
    reason: str = ""
    unmet: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.verdict in SUCCESS_VERDICTS


def state_goal(instruction: str, code: str, objects: Sequence[str], kinds: dict[str, str]) -> Goal:
    """The goal of ``code`` for ``instruction`` on a table with ``objects`` (``kinds``: name
    -> "block" | "bowl")."""
    if is_question(instruction):
        return Goal("answer")
    text = " ".join(instruction.lower().split())
    named = objects_named(instruction, objects)
    destination = _destination(text, named)
    subject = _subject(text, named, destination)
    if subject is not None and destination is not None:
        relation = "in" if kinds.get(destination) == "bowl" else "on"
        return Goal("relations", (Relation(subject, relation, destination),))
    aimed = _program_relations(code, objects, kinds)
    if aimed:
        return Goal("relations", tuple(aimed))
    if destination is not None:
        return Goal("into", moved=(destination,))
    return Goal("moved", moved=(subject,) if subject else ())


def corrected_goal(goal: Goal, outcome: PlanOutcome, objects, kinds: dict[str, str]) -> Goal:
    """The goal after a person's accepted edits changed the calls: the relations the calls
    that ran aim at (their arguments as edited), else ``goal``."""
    relations = []
    for intent in outcome.intents:
        target = intent.args.get("target") if intent.skill == _PUT else None
        obj = intent.args.get("obj")
        if intent.ok and isinstance(obj, str) and isinstance(target, str) and target in objects:
            relations.append(Relation(obj, "in" if kinds.get(target) == "bowl" else "on", target))
    return Goal("relations", tuple(relations)) if relations else goal


def judge(goal: Goal, outcome: PlanOutcome, world, before: dict) -> Verdict:
    """The verdict of a finished run: ``world`` is read now, ``before`` holds the object
    positions (name -> [x, y, z]) from before the run."""
    if not outcome.ok:
        kind = "refused" if outcome.kind in ("denied", "stopped") or outcome.denied else "failed"
        return Verdict(kind, goal, outcome.headline())
    if goal.kind == "answer":
        return Verdict("answered", goal)
    moves = [i for i in outcome.intents if i.ok and _is_motion(i.skill)]
    if goal.kind == "into":
        arrived = _arrived(world, goal.moved[0], before)
        if arrived:
            return Verdict("goal_reached", goal)
        return Verdict(
            "goal_not_reached",
            goal,
            _not_reached([goal.describe()], moves, outcome),
            [goal.describe()],
        )
    if goal.kind == "relations":
        unmet = [str(r) for r in goal.relations if not _holds(world, r)]
        if not unmet:
            return Verdict("goal_reached", goal)
        return Verdict("goal_not_reached", goal, _not_reached(unmet, moves, outcome), unmet)
    if not moves:
        return Verdict("goal_not_reached", goal, _nothing_moved(outcome), [goal.describe()])
    still = [n for n in goal.moved if not _moved(world, n, before)]
    if still:
        reason = f"finished, but {', '.join(repr(n) for n in still)} did not move"
        return Verdict("goal_not_reached", goal, reason, [goal.describe()])
    return Verdict("goal_reached", goal)


def objects_named(text: str, objects: Sequence[str]) -> list[str]:
    """The objects ``text`` names, in the order it names them."""
    lowered = " ".join(text.lower().split())
    found = []
    for name in objects:
        match = re.search(rf"\b{re.escape(name.lower())}\b", lowered)
        if match:
            found.append((match.start(), name))
    return [name for _, name in sorted(found)]


def _destination(text: str, named: list[str]) -> str | None:
    """The last named object that follows "in/into/on/onto/to (the)": where things go."""
    for name in reversed(named):
        at = text.rfind(name.lower())
        if at > 0 and _INTO.search(text[:at]):
            return name
    return None


def _subject(text: str, named: list[str], destination: str | None) -> str | None:
    """The first named object when nothing before it refers to another one ("put the red
    block ..." but not "put the block closest to the red block ...")."""
    for name in named:
        if name == destination:
            continue
        before = text[: text.find(name.lower())]
        return None if _REFERRING.search(before) else name
    return None


def _program_relations(code: str, objects: Sequence[str], kinds: dict[str, str]):
    """The relations the program's ``put_first_on_second('a', 'b')`` calls aim at."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    relations = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", "") == _PUT):
            continue
        args = [a.value for a in node.args[:2] if isinstance(a, ast.Constant)]
        if len(args) == 2 and all(isinstance(v, str) and v in objects for v in args):
            relations.append(
                Relation(args[0], "in" if kinds.get(args[1]) == "bowl" else "on", args[1])
            )
    return relations


def _holds(world, relation: Relation) -> bool:
    try:
        if relation.relation == "in":
            return world.is_in(relation.a, relation.b)
        return world.is_on(relation.a, relation.b)
    except Exception:  # an object that left the scene: the relation does not hold
        return False


def _arrived(world, destination: str, before: dict) -> list[str]:
    """Objects that moved and now rest in (or on) ``destination``."""
    found = []
    for name in world.present:
        if name != destination and _moved(world, name, before):
            relation = Relation(
                name, "in" if world.object_kind(destination) == "bowl" else "on", destination
            )
            if _holds(world, relation):
                found.append(name)
    return found


def _moved(world, name: str, before: dict) -> bool:
    start = before.get(name)
    if start is None:
        return False
    end = world.object_pose(name).position
    return float(((end[0] - start[0]) ** 2 + (end[1] - start[1]) ** 2) ** 0.5) > MOVED_METRES


def _is_motion(skill: str) -> bool:
    from lang2policy.skills.catalog import SKILLS

    spec = SKILLS.get(skill)
    return spec is not None and spec.category == "motion"


def _nothing_moved(outcome: PlanOutcome) -> str:
    said = f"; it only said: {one_line(' | '.join(outcome.said))}" if outcome.said else ""
    return f"the program finished without moving anything{said}"


def _not_reached(unmet: list[str], moves: list, outcome: PlanOutcome) -> str:
    if not moves:
        return _nothing_moved(outcome) + f"; the goal {' and '.join(unmet)} does not hold"
    return f"the program finished, but {' and '.join(unmet)} does not hold in the scene"
