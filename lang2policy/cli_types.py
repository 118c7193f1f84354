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
import os

from lang2policy.text_quote import escape_char

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
    """Text from the command line: valid UTF-8, printable, one line."""
    if any("\ud800" <= char <= "\udfff" for char in value):
        raise argparse.ArgumentTypeError(_not_utf8(value))
    for index, char in enumerate(value):
        if not char.isprintable() and char != "\t":
            raise argparse.ArgumentTypeError(
                f"the character {escape_char(char)} at offset {index} is a control character "
                "or line break; give one line of printable text"
            )
    return value


def _not_utf8(value: str) -> str:
    """Where the first byte that is not UTF-8 sits in the argument as given."""
    try:
        raw = os.fsencode(value)  # the bytes of argv, as surrogateescape recorded them
        raw.decode("utf-8")
    except UnicodeEncodeError:  # a surrogate that no undecodable byte produced
        pass
    except UnicodeDecodeError as exc:
        offset, byte = exc.start, raw[exc.start]
        return (
            f"the byte 0x{byte:02x} at offset {offset} is not valid UTF-8; the text must be "
            "UTF-8 (check the terminal's or file's encoding)"
        )
    return "the text has characters that cannot be encoded as UTF-8; the text must be UTF-8"
