"""SayCan-style scores of candidate programs: the model's likelihood times grounding (issue 15).

SayCan multiplies what the language model finds likely by what is feasible in the scene; here
both are additive terms in log space, so ``Score.total`` is 0 for a program with no problem
and no likelihood penalty, and every problem subtracts its weight::

    total = LIKELIHOOD * max(mean token logprob, -LIKELIHOOD_FLOOR)    (0 when not reported)
          - PROBLEM * (grammar problems + problems from the ``checks`` callback)
          - MISSING_OBJECT * (share of the instruction's objects the program never names)
          - EXTRA_OBJECT * (each object the program names that the instruction does not)
          - SAY_ONLY        (a motion instruction answered without any motion skill)

Why these weights: grounding decides, likelihood breaks near-ties. A 270M model's mean token
logprob for two plausible one-line programs differs by a few tenths of a nat, and a confidently
wrong program (another object, a ``say`` instead of a motion) is often *more* likely than the
right one once a history of ``say`` lines is in the prompt, which is the failure issue 15 is
about. So the likelihood term is capped at ``LIKELIHOOD * LIKELIHOOD_FLOOR`` = 0.5, half a
problem, while naming the wrong object (``MISSING_OBJECT`` * 1/2 + ``EXTRA_OBJECT`` = 1.5),
any grammar or dry-run problem (1.0 each) and a say-only answer to a motion request (3.0)
outweigh it. Among grounded programs the likelier one wins.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from lang2policy.planning.code_grammar_check import check_program
from lang2policy.skills.catalog import SKILLS

LIKELIHOOD = 0.2
LIKELIHOOD_FLOOR = 2.5  # nats per token; lower means are clipped (at most 0.5 off)
PROBLEM = 1.0
MISSING_OBJECT = 2.0
EXTRA_OBJECT = 0.5
SAY_ONLY = 3.0

# (program code, objects) -> problems found by the caller (e.g. a dry run of the intents
# through the privilege policy and reachability); [] when the program passes.
Checks = Callable[[str, Sequence[str]], list[str]]

_MOTION_SKILLS = frozenset(name for name, skill in SKILLS.items() if skill.category == "motion")
_MOTION_WORDS = re.compile(
    r"\b(put|place|move|stack|unstack|push|pick|lift|drop|slide|bring|set|arrange|sort|"
    r"shift|grab|take|carry|transfer|swap|line up|go|return|undo|back|clear|gather|"
    r"collect|separate|spread|nudge|shove|insert|fill|empty)\b",
    re.IGNORECASE,
)
_QUESTION = re.compile(
    r"^\s*(what|which|where|how|is|are|do|does|can you (see|tell)|tell|list|count|say|name)\b",
    re.IGNORECASE,
)
_COLOURS = "red|green|blue|yellow|orange|purple|pink|cyan|gray|grey|brown|white|black|magenta"
_COLOURED_THING = re.compile(rf"\b({_COLOURS}) (block|bowl)\b", re.IGNORECASE)


@dataclass
class Score:
    """A candidate's total (higher is better) and what lowered or raised it."""

    total: float
    reasons: list[str] = field(default_factory=list)


def score(
    code: str,
    instruction: str,
    objects: Sequence[str],
    *,
    checks: Sequence[Checks] = (),
    mean_logprob: float | None = None,
    provided: Iterable[str] = (),
) -> Score:
    """Score ``code`` for ``instruction`` on a table with ``objects`` (module docstring);
    each of ``checks`` (run only on code that parses) adds its problems; ``provided``: the
    functions the planner supplies (its parsing helpers, ``PromptSet.parsers``)."""
    reasons: list[str] = []
    total = 0.0
    if mean_logprob is not None:
        likelihood = LIKELIHOOD * max(mean_logprob, -LIKELIHOOD_FLOOR)
        total += likelihood
        reasons.append(f"likelihood {mean_logprob:.2f} nats/token ({likelihood:+.2f})")
    problems = program_problems(code, objects, provided)
    if _parse(code) is not None:
        for check in checks:
            problems += check(code, objects)
    total -= PROBLEM * len(problems)
    reasons += [f"{p} ({-PROBLEM:+.1f})" for p in problems]
    for penalty, reason in _object_terms(code, instruction, objects):
        total -= penalty
        reasons.append(f"{reason} ({-penalty:+.1f})")
    if asks_for_motion(instruction, objects) and not moves(code):
        total -= SAY_ONLY
        reasons.append(f"asks for motion, the program never moves ({-SAY_ONLY:+.1f})")
    return Score(total=round(total, 4), reasons=reasons)


def _object_terms(code: str, instruction: str, objects: Sequence[str]) -> list[tuple[float, str]]:
    """(penalty, reason) for the instruction's objects the program never names (a literal
    that contains the name counts, e.g. ``parse_obj_name('the block left of the blue bowl')``)
    and for objects present that it names but the instruction does not."""
    named = _literals(code)
    wanted = instruction_objects(instruction, objects)
    terms = []
    missing = [obj for obj in wanted if not any(obj in text for text in named)]
    if missing:
        terms.append(
            (
                MISSING_OBJECT * len(missing) / len(wanted),
                f"never names {', '.join(missing)} from the instruction",
            )
        )
    extra = sorted({t for t in named if t in objects and t not in wanted}) if wanted else []
    if extra:
        terms.append(
            (EXTRA_OBJECT * len(extra), f"names {', '.join(extra)}, not in the instruction")
        )
    return terms


def instruction_objects(instruction: str, objects: Sequence[str]) -> list[str]:
    """The objects present that ``instruction`` names, in the order ``objects`` lists them."""
    text = " ".join(instruction.lower().split())
    return [obj for obj in objects if re.search(rf"\b{re.escape(obj.lower())}s?\b", text)]


def asks_for_motion(instruction: str, objects: Sequence[str]) -> bool:
    """Whether ``instruction`` asks the arm to move something that is there: a motion verb,
    not a question, and every "<colour> block/bowl" it names is on the table (asked to move
    a missing object, saying so is the right answer)."""
    if instruction.strip().endswith("?") or _QUESTION.match(instruction):
        return False
    if not _MOTION_WORDS.search(instruction):
        return False
    present = {obj.lower() for obj in objects}
    named = {f"{colour} {noun}".lower() for colour, noun in _COLOURED_THING.findall(instruction)}
    return named <= present


def moves(code: str) -> bool:
    """Whether ``code`` calls any motion skill (anywhere, helper definitions included)."""
    tree = _parse(code)
    return tree is not None and any(
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _MOTION_SKILLS
        for node in ast.walk(tree)
    )


def program_problems(code: str, objects: Sequence[str], provided: Iterable[str] = ()) -> list[str]:
    """What makes ``code`` ungrounded: ``code_grammar.check_program`` (it parses; every call is
    a skill, a defined function or a sandbox name; skill calls have the right arity; literal
    object arguments name objects present)."""
    return list(check_program(code, list(objects), provided))


def _literals(code: str) -> list[str]:
    """The program's string literals outside what it says: ``say('putting the red block in
    the bowl')`` names nothing it acts on, so it must not count as naming the objects."""
    tree = _parse(code)
    if tree is None:
        return re.findall(r"['\"]([^'\"\n]*)['\"]", code)
    spoken = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "say"
        for inner in ast.walk(node)
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in spoken
    ]


def _parse(code: str) -> ast.Module | None:
    try:
        return ast.parse(code)
    except SyntaxError:
        return None
