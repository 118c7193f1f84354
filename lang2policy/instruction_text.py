"""Is a piece of instruction text one line of printable UTF-8? The one check wherever an
instruction enters: the terminal (every typed or piped line), the ROS topic and
``lang2policy run`` (``lang2policy.planning.route.check_instruction``).

Text read with Python's ``surrogateescape`` (the terminal's stdin, prompt_toolkit's input,
``argv``) holds a lone surrogate for each byte that was not UTF-8; such text is refused with the
byte's offset instead of being replaced, because a silently altered instruction could make the
robot do something else than what was asked. Every character ``str.isprintable`` refuses except
a tab is refused too (control characters, ``\\x85``, U+2028 and the other line breaks, format
characters): an instruction is one line, and it is shown in prompts and reports.

Kept apart from ``lang2policy.planning`` so the terminal can use it without importing the
planner (and its LLM client).
"""

from __future__ import annotations

from lang2policy.text_quote import escape_char

# Colour words of object names ("red block"): an instruction naming a colour names an object.
COLOURS = ("red", "green", "blue", "yellow", "orange", "purple", "pink", "cyan", "brown",
           "gray", "grey", "white", "black")

__all__ = ["text_problem", "utf8_problem"]


def text_problem(text: str, what: str = "instruction") -> str | None:
    """Why ``text`` is not one line of printable UTF-8 text, or None when it is.

    The one check of instruction text wherever it enters (the terminal, the ROS topic,
    ``lang2policy run``): bytes that were not UTF-8 (lone surrogates, as ``surrogateescape``
    decodes them) are named with their byte offset, and every character ``str.isprintable``
    refuses except a tab (control characters, ``\\x85``, U+2028 and the other line breaks,
    format characters) with its escape and offset: such text would be altered, or split into
    lines, on its way to the planner and into the reports."""
    problem = utf8_problem(text, what)
    if problem is not None:
        return problem
    for offset, char in enumerate(text):
        if not char.isprintable() and char != "\t":
            return (
                f"the {what} contains control characters or line breaks; use one line of plain "
                f"text (the character {escape_char(char)} at offset {offset})"
            )
    return None


def utf8_problem(text: str, what: str = "instruction") -> str | None:
    """Where ``text`` holds a lone surrogate (a byte that was not UTF-8, as Python's
    ``surrogateescape`` decodes it), or None when it holds none. The offset is that of the
    byte in the UTF-8 bytes of ``text`` as given (the line as typed or read)."""
    first = next((i for i, c in enumerate(text) if "\ud800" <= c <= "\udfff"), None)
    if first is None:
        return None
    advice = f"the {what} must be UTF-8 text (check the terminal's or file's encoding)"
    lone = (
        f"the character {escape_char(text[first])} at offset {first} is a lone surrogate, "
        f"not a character; {advice}"
    )
    try:
        raw = text.encode("utf-8", "surrogateescape")
        raw.decode("utf-8")
    except UnicodeEncodeError:  # a surrogate no undecodable byte produced (e.g. from JSON)
        return lone
    except UnicodeDecodeError as exc:
        return f"the byte 0x{raw[exc.start]:02x} at offset {exc.start} is not valid UTF-8; {advice}"
    return lone  # escaped bytes that form valid UTF-8: no decoder of bytes produces these
