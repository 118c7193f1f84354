"""GBNF (llama.cpp grammar) helpers shared by the grammars of reward code and policy code."""

from __future__ import annotations


def gbnf_literal(text: str) -> str:
    """``text`` as a GBNF string literal (backslashes, quotes and newlines escaped)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
