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
"""

from __future__ import annotations

import argparse

from lang2policy.instruction_text import text_problem

MAX_SEED = 2**32 - 1

__all__ = ["MAX_SEED", "seed", "text"]


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
