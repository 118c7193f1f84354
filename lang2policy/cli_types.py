"""Argument types for the command lines: a scene seed and a piece of text (an instruction, an
object list), checked where they enter, so that a bad value is an argparse usage error (a
one-line message, exit code 2), never a traceback.

- ``seed``: an integer from 0 to ``MAX_SEED`` (2**32 - 1). numpy's ``default_rng`` refuses
  negative seeds; the upper bound keeps seeds valid for every generator a scene may use (the
  legacy ``RandomState`` takes 32 bits) and short in reports.
- ``text``: the argument as the user typed it, which must be valid UTF-8 and printable. Python
  decodes undecodable bytes of ``argv`` to lone surrogates (surrogateescape); they are refused
  with the offset of the first bad byte instead of being replaced, because a silently altered
  instruction could make the robot do something else than what was asked. Control characters
  and line breaks (``str.isprintable``; a tab or space is fine) are refused too: an
  instruction is one line of text.

The shared flags of the commands (``--robot``, ``--seed``, ``--llm``) are added here too, so that
every command and benchmark spells and documents them the same way.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable

from lang2policy.errors import Lang2PolicyError
from lang2policy.instruction_text import text_problem

MAX_SEED = 2**32 - 1

LLM_HELP = (
    "local (Gemma 3 270M on a local llama.cpp server, the default), openai (OPENAI_API_KEY, "
    "OPENAI_BASE_URL, OPENAI_MODEL), replay:FILE, record:FILE or cache:FILE"
)

__all__ = [
    "LLM_HELP",
    "MAX_SEED",
    "add_robot",
    "add_seed",
    "names",
    "seed",
    "text",
]


def seed(value: str) -> int:
    """``--seed``: an integer from 0 to ``MAX_SEED``."""
    allowed = f"a seed is a whole number from 0 to {MAX_SEED}"
    try:
        number = int(value.strip(), 10)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{value[:40]!r} is not a whole number; {allowed}"
        ) from None
    if not 0 <= number <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"{number} is out of range; {allowed}")
    return number


def text(value: str) -> str:
    """Text from the command line: valid UTF-8, printable, one line (``text_problem``)."""
    problem = text_problem(value, "text")
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return value


def add_robot(parser: argparse.ArgumentParser) -> None:
    """``--robot``: the robot description a command runs on."""
    parser.add_argument("--robot", default="so101", help="robot description (so101, panda)")


def positive_int(value: str) -> int:
    """A whole number of at least 1, written plainly or as ``1e6`` (step and episode counts)."""
    try:
        number = int(float(value)) if "e" in value.lower() else int(value)
    except (ValueError, OverflowError):
        raise argparse.ArgumentTypeError(f"{value[:40]!r} is not a whole number") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"{number} must be at least 1")
    return number


def positive_float(value: str) -> float:
    """A finite number above 0 (rates, learning rates)."""
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value[:40]!r} is not a number") from None
    if not math.isfinite(number) or number <= 0.0:
        raise argparse.ArgumentTypeError(f"{value[:40]} must be a finite number above 0")
    return number


def add_seed(parser: argparse.ArgumentParser, what: str = "scene seed") -> None:
    """``--seed`` (default 0), its help ``what`` with the valid range."""
    parser.add_argument("--seed", type=seed, default=0, help=f"{what} (0 to {MAX_SEED})")


def names(value: str | None) -> list[str] | None:
    """A comma-separated list flag (``--tasks a,b``) as its stripped, non-empty items; None
    (all of them) when the flag was not given or is empty."""
    if not value:
        return None
    return [item.strip() for item in value.split(",") if item.strip()]


OBJECTS_HELP = 'comma-separated objects, e.g. "red block,blue bowl"'


def objects(value: str | None) -> tuple[str, ...] | None:
    """``--objects`` as a tuple of names (None: the command's default scene)."""
    if value is None:
        return None
    found = tuple(names(value) or ())
    if not found:
        raise Lang2PolicyError("--objects needs at least one object name")
    return found


def print_report(report: dict, as_json: bool, formatter: Callable[[dict], str]) -> None:
    """A command's report: JSON with ``--json``, else its text."""
    print(json.dumps(report, indent=2) if as_json else formatter(report))
