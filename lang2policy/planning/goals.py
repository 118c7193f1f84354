"""What a code plan is for, and whether it got there: the success condition and the verdict.

The planner states a ``Goal`` with each plan (Inner Monologue style), before the arm moves:

* first, a compound request read from the instruction (``goal_phrases``): every block into
  one bowl (``is_in`` for each block), each block into the bowl of its colour, all the blocks
  in one tower (``one_tower``), a block beside an object on one side (``is_left_of`` ...), the
  blocks in a line (``in_a_line``), a block at a corner or side of the table (``at_corner``);
  their geometry is in ``goal_checks``. A phrase these readings are not sure of falls through
  to the rules below;
* else the **relation** the person asked for, read from the instruction: "put the red block in
  the yellow bowl" -> ``is_in('red block', 'yellow bowl')``; "stack the red block on the green
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

from lang2policy.planning import goal_checks
from lang2policy.planning.goal_phrases import named_in, read_request
from lang2policy.planning.route import is_question
from lang2policy.sandbox.outcome import PlanOutcome
from lang2policy.text_quote import one_line

# "done_not_verified": it ran and moved what it named, but no goal the scene could confirm was
# read from the instruction (its only check was that something moved)
SUCCESS_VERDICTS = ("goal_reached", "done_not_verified", "answered")
VERDICTS = (
    "goal_reached",
    "done_not_verified",
    "goal_not_reached",
    "answered",
    "refused",
    "failed",
)
_PUT = "put_first_on_second"
MOVED_METRES = 0.02  # an object whose centre moved farther than this (x, y) was moved
_INTO = re.compile(r"\b(in|into|inside|onto|on|on top of|to|in to|on to)\s+(the\s+)?$")
# "next to the bowl", "close to the bowl": "to" that does not name a destination
_NOT_INTO = re.compile(r"\b(next|close|closer|near|nearer|adjacent)\s+(to|on|onto)\s+(the\s+)?$")
# Words that make a named object a reference ("the block closest to the green bowl"), not the
# thing to move.
_REFERRING = re.compile(
    r"\b(closest|nearest|farthest|furthest|near|next|beside|behind|left|right|of|from|by|"
    r"with|than|to)\b"
)


@dataclass(frozen=True)
class Relation:
    """``a`` in (bowl) or on (block) ``b``; or ``a`` on the table beside ``b``, on its
    ``direction`` side ("left" | "right" | "top" | "bottom", the robot's frame)."""

    a: str
    relation: str  # "in" | "on" | "beside"
    b: str
    direction: str = ""  # "beside": the side of ``b``

    def __str__(self) -> str:
        if self.relation == "beside":
            return f"is_{self.direction}_of({self.a!r}, {self.b!r})"
        return f"is_{self.relation}({self.a!r}, {self.b!r})"


@dataclass(frozen=True)
class Goal:
    """The success condition of one plan."""

    kind: str  # "relations" | "into" | "moved" | "answer" | "one_tower" | "in_a_line" | "at_corner"
    relations: tuple[Relation, ...] = ()
    moved: tuple[str, ...] = ()  # "moved": objects that must move (empty: the arm);
    # "into": the destination something must arrive in or on
    objects: tuple[str, ...] = ()  # the blocks of "one_tower", "in_a_line", "at_corner"
    place: str = ""  # "in_a_line": the orientation ("" any); "at_corner": the corner's name
    request: str = ""  # the compound request it was read from (goal_phrases), "" for none
    # "at_point" (lying on the table) and "at_point_any": where each of ``objects`` must be,
    # (x, y) in metres, within ``tolerance``; ``place`` says it in words
    points: tuple[tuple[float, float], ...] = ()
    tolerance: float = 0.0
    steps: tuple[Goal, ...] = ()  # "steps": each step's goal (``objects``: the steps' words)

    def describe(self) -> str:
        if self.kind == "steps":
            return " then ".join(f"[{i}] {g.describe()}" for i, g in enumerate(self.steps, 1))
        if self.kind == "relations":
            return " and ".join(str(r) for r in self.relations)
        names = ", ".join(repr(n) for n in self.objects)
        if self.kind == "one_tower":
            return f"one_tower({names})"
        if self.kind == "in_a_line":
            return f"in_a_line({self.place!r}: {names})" if self.place else f"in_a_line({names})"
        if self.kind == "at_corner":
            return f"at_corner({names}, {self.place!r})"
        if self.kind in ("at_point", "at_point_any"):
            spots = ", ".join(f"[{x:.3f}, {y:.3f}]" for x, y in self.points)
            return f"at({names}: {self.place}, {spots} within {self.tolerance * 100:.1f} cm)"
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
    compound = _compound_goal(instruction, objects, kinds)
    if compound is not None:
        return compound
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
    that ran aim at (their arguments as edited), else ``goal``. A compound goal (read from the
    instruction: all the blocks, a tower, a line, ...) stays as it is: one edited call does
    not say the whole request changed."""
    if goal.request:
        return goal
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
    if goal.kind in ("relations", *_SHAPES):
        problems = _problems(goal, world)
        if not problems:
            return Verdict("goal_reached", goal)
        unmet = [what for what, _ in problems]
        reason = _not_reached(unmet, moves, outcome)
        why = "; ".join(w for _, w in problems if w)
        return Verdict("goal_not_reached", goal, f"{reason}: {why}" if why else reason, unmet)
    if not moves:
        return Verdict("goal_not_reached", goal, _nothing_moved(outcome), [goal.describe()])
    still = [n for n in goal.moved if not _moved(world, n, before)]
    if still:
        reason = f"finished, but {', '.join(repr(n) for n in still)} did not move"
        return Verdict("goal_not_reached", goal, reason, [goal.describe()])
    reason = "no goal the scene can confirm was read from the instruction; only that it moved"
    return Verdict("done_not_verified", goal, reason)


def unmet_now(goal: Goal, world) -> str:
    """Why ``goal`` does not hold in ``world`` now ("" when it does, or when it is a goal
    that only a run can show: moved, into, answer)."""
    if goal.kind == "steps":
        return next((why for g in goal.steps if (why := unmet_now(g, world))), "")
    if goal.kind not in ("relations", *_SHAPES):
        return ""
    return "; ".join(what + (f" ({why})" if why else "") for what, why in _problems(goal, world))


def _compound_goal(instruction: str, objects: Sequence[str], kinds: dict[str, str]):
    """The goal of a compound request (``goal_phrases.read_request``), or None."""
    request = read_request(instruction, objects, kinds)
    return None if request is None else goal_of_request(request)


def goal_of_request(request) -> Goal:
    """The goal of a request read from the instruction (``goal_phrases.Request``) whose goal
    needs no positions: every kind but the spatial vocabulary's offsets, between and back."""
    if request.kind in ("all_in_bowl", "matching"):
        relations = tuple(Relation(a, "in", b) for a, b in request.pairs)
        return Goal("relations", relations, request=request.kind)
    if request.kind == "beside":
        relation = Relation(request.subject, "beside", request.reference, request.place)
        return Goal("relations", (relation,), request=request.kind)
    if request.kind == "tower":
        return Goal("one_tower", objects=request.blocks, request=request.kind)
    if request.kind == "line":
        return Goal("in_a_line", objects=request.blocks, place=request.place, request="line")
    return Goal("at_corner", objects=(request.subject,), place=request.place, request="corner")


def _problems(goal: Goal, world) -> list[tuple[str, str]]:
    """(what does not hold, why: measured, or "") for each part of ``goal`` that does not."""
    if goal.kind in _SHAPES:
        try:
            why = _SHAPES[goal.kind](world, goal)
        except Exception as exc:  # an object that left the scene, a world without a readout
            why = f"it could not be checked ({type(exc).__name__}: {one_line(str(exc))})"
        return [(goal.describe(), why)] if why else []
    problems = []
    for relation in goal.relations:
        if relation.relation == "beside":
            try:
                why = goal_checks.beside(world, relation.a, relation.direction, relation.b)
            except Exception as exc:
                why = f"it could not be checked ({type(exc).__name__}: {one_line(str(exc))})"
            if why:
                problems.append((str(relation), why))
        elif not _holds(world, relation):
            problems.append((str(relation), ""))
    return problems


# goal kind -> its check: None when it holds, else why not
_SHAPES = {
    "one_tower": lambda world, goal: goal_checks.one_tower(world, goal.objects),
    "in_a_line": lambda world, goal: goal_checks.in_a_line(world, goal.objects, goal.place),
    "at_corner": lambda world, goal: goal_checks.at_corner(world, goal.objects[0], goal.place),
    "at_point": lambda world, goal: goal_checks.at_points(world, goal, on_table=True),
    "at_point_any": lambda world, goal: goal_checks.at_points(world, goal, on_table=False),
}


def objects_named(text: str, objects: Sequence[str]) -> list[str]:
    """The objects ``text`` names, in the order it names them."""
    return named_in(" ".join(text.lower().split()), objects)


def _destination(text: str, named: list[str]) -> str | None:
    """The last named object that follows "in/into/on/onto/to (the)": where things go."""
    for name in reversed(named):
        at = text.rfind(name.lower())
        if at > 0 and _INTO.search(text[:at]) and not _NOT_INTO.search(text[:at]):
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
        args = [
            a.value
            for a in node.args[:2]
            if isinstance(a, ast.Constant) and isinstance(a.value, str)
        ]
        if len(args) == 2 and all(v in objects for v in args):
            relations.append(
                Relation(args[0], "in" if kinds.get(args[1]) == "bowl" else "on", args[1])
            )
    return relations


def _holds(world, relation: Relation) -> bool:
    """Whether ``relation`` holds now. A block is in a bowl when it rests inside it or on a
    block that does (two blocks put in one bowl often end up one on the other)."""
    try:
        if relation.relation == "in":
            return world.is_in(relation.a, relation.b) or any(
                world.is_in(other, relation.b) and world.is_on(relation.a, other)
                for other in world.present
                if other not in (relation.a, relation.b) and world.object_kind(other) == "block"
            )
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
