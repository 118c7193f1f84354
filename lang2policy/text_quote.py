"""Untrusted text shown inside a prompt or a report: one escaped line that cannot leave its field.

Exception messages and printed output come from LLM-written policy code, said text and skill
names from the same program, object names from the scene (perception, the network). Such text
is attacker-controlled: a raw line break in it would start a line of the repair prompt or of
a report that reads like the host's own (an uncommented instruction to the LLM, a forged
``outcome : ok``). ``str.splitlines`` breaks on far more than ``\\n``: ``\\r``, ``\\x0b``,
``\\x0c``, ``\\x1c``-``\\x1e``, ``\\x85``, U+2028 and U+2029 all start a new line for a reader
that splits that way.

``one_line`` is the one way such text is rendered: every character ``str.isprintable`` refuses
(control and format characters, every line and paragraph separator, lone surrogates,
unassigned code points) is written as the escape ``repr`` would use (``\\r``, ``\\x85``,
``\\u2028``), and the result is bounded in length. Printable text, the normal case, comes back
unchanged, so prompts (and their recorded replies) stay the same. Backslashes are kept as they
are: the result is for reading, never parsed back.

``prompt_quote`` is the one way such text enters an LLM prompt: ``one_line`` (or, with
``literal=True``, a Python string literal), and also every opening of what a tokenizer may
read as a chat-control token (``<|im_start|>``, ``<start_of_turn>``, ``<bos>``, ``</s>``,
``[INST]``) escaped (``\\x3c|im_start|>``): llama.cpp parses such text in a prompt as the
token itself, which would open a turn of the model's chat template. With no line break left, a
role marker in the text (``User:``) cannot start a line either. ``prompt_block`` quotes each
``\\n``-separated line of text that is lines by nature (code, a description).
"""

from __future__ import annotations

import re

DEFAULT_LIMIT = 2000  # characters of the rendered line, before the truncation note
_SHORT_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}

# The first character of a possible control token: "<|" (ChatML, Llama 3), "<word>" and
# "</word>" (Gemma's <start_of_turn>, <bos>, Llama 2's </s>, Qwen's <think>), "[WORD]" and
# "[/WORD]" (Mistral's [INST]).
_CONTROL_TOKEN = re.compile(r"<(?=\||/?[A-Za-z_][\w.:-]*>)|\[(?=/?[A-Z][A-Z_]{2,}\])")

__all__ = [
    "DEFAULT_LIMIT",
    "escape_char",
    "one_line",
    "prompt_block",
    "prompt_quote",
    "quoted_lines",
]


def escape_char(char: str) -> str:
    """``char`` written as its Python escape (``\\n``, ``\\x85``, ``\\u2028``, ``\\U000e0001``)."""
    if char in _SHORT_ESCAPES:
        return _SHORT_ESCAPES[char]
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def one_line(text: str, limit: int = DEFAULT_LIMIT) -> str:
    """``text`` as one printable line of at most ``limit`` characters (plus a note saying how
    many characters were cut): every non-printable character escaped, nothing else changed."""
    if not isinstance(text, str):
        raise TypeError(f"one_line quotes text (str), got {type(text).__name__}")
    if limit < 1:
        raise ValueError(f"limit must be at least 1 character, got {limit}")
    if len(text) <= limit and text.isprintable():
        return text
    pieces: list[str] = []
    used = 0
    for index, char in enumerate(text):
        piece = char if char.isprintable() else escape_char(char)
        if used + len(piece) > limit:
            return "".join(pieces) + f" ...[{len(text) - index} more characters]"
        pieces.append(piece)
        used += len(piece)
    return "".join(pieces)


def quoted_lines(text: str, prefix: str, limit: int = DEFAULT_LIMIT, max_lines: int = 200) -> str:
    """Multi-line untrusted text (printed output) as lines that each start with ``prefix``.

    Only ``\\n`` separates lines; every other line break stays inside its line, escaped, so
    no line of the result starts with anything but ``prefix``. At most ``max_lines`` lines are
    kept; a last line says how many were left out."""
    lines = text.split("\n")
    shown = [prefix + one_line(line, limit) for line in lines[:max_lines]]
    if len(lines) > max_lines:
        shown.append(f"{prefix}...[{len(lines) - max_lines} more lines]")
    return "\n".join(shown)


def prompt_quote(text: str, *, literal: bool = False, limit: int = DEFAULT_LIMIT) -> str:
    """Untrusted ``text`` (an object name, a status or error text, file content, an earlier
    answer) as it may appear in a prompt: ``one_line(text, limit)``, or with ``literal`` its
    Python string literal (``repr``, never cut: it must keep its value), with the opening
    character of every possible chat-control token escaped (``\\x3c``, ``\\x5b``; in a
    literal the same value). Ordinary text comes back as ``one_line``/``repr`` give it, so
    prompts of ordinary scenes stay as they were."""
    if not isinstance(text, str):
        raise TypeError(f"prompt_quote quotes text (str), got {type(text).__name__}")
    quoted = repr(text) if literal else one_line(text, limit)
    return _CONTROL_TOKEN.sub(lambda m: escape_char(m.group(0)), quoted)


def prompt_block(text: str, limit: int = DEFAULT_LIMIT) -> str:
    """Text that is lines by nature (code, a filled description): each ``\\n``-separated line
    through ``prompt_quote``, so every other line break, control character and control
    token stays escaped inside its line."""
    return "\n".join(prompt_quote(line, limit=limit) for line in text.split("\n"))
