"""Few-shot examples chosen per instruction by similarity (issue 15, item 3).

The planner's main prompt is a preamble (the header with the robot API, and the first comment
line of ``main.txt``) followed by example blocks, each starting at an ``objects = [...]`` line::

    objects = ['yellow block', 'green block', 'yellow bowl', 'blue bowl']
    # put the yellow block in the blue bowl.
    put_first_on_second('yellow block', 'blue bowl')

``ExampleBank.parse`` splits the prompt into those blocks (a block may hold several turns, e.g.
an instruction and its "now put it back."); ``ExampleRetriever`` embeds each block's first
instruction once per process with the MiniLM embedder that the corrections memory uses, and
builds the prompt from the preamble and the ``k`` blocks most similar to a new instruction,
the most similar last (nearest to the instruction the model completes). Fewer examples mean a
shorter prompt; examples of the same kind as the instruction mean the model copies the right
pattern (a 270M model copies the nearest example far more than it reasons).

Blocks that show a repair (``# error:`` / ``# fix:``) are left out of first plans; repair
prompts get them (``repair=True``). A repair whose fix only speaks (``say('I see no pink
bowl')``, the right answer when an object is missing) is left out too when the instruction
asks for motion and names only objects that are there (``motion=True``): a small model copies
the fix it is shown, and a ``say`` there turns a failed pick-and-place into a second failure.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lang2policy.corrections.embedder import Embedder
from lang2policy.instruction_text import COLOURS
from lang2policy.planning.scoring import moves

_BLOCK_START = "objects = "
_INSTRUCTION = re.compile(r"^#\s*(?!\()(.+?)\s*$")  # a comment that is not "# (a note)"
_REPAIR_MARK = re.compile(r"^# (error|fix):", re.MULTILINE)
_COLOUR_WORD = re.compile(r"\b(" + "|".join(COLOURS) + r")\s+", re.IGNORECASE)


@dataclass(frozen=True)
class Example:
    """One example block: its text as in the prompt (objects line first, no trailing
    newline), its first instruction (what similarity is measured on) and whether it shows
    a repair."""

    text: str
    instruction: str
    repair: bool = False
    fix_moves: bool = False  # a repair whose fix calls a motion skill


@dataclass(frozen=True)
class ExampleBank:
    """A main prompt split into its preamble and example blocks."""

    preamble: str
    examples: tuple[Example, ...]

    @classmethod
    def parse(cls, prompt: str) -> ExampleBank:
        """Split ``prompt`` (``PromptSet.main``) at every line that starts with
        ``objects = ``; the text before the first one is the preamble."""
        lines = prompt.rstrip("\n").split("\n")
        starts = [i for i, line in enumerate(lines) if line.startswith(_BLOCK_START)]
        if not starts:
            return cls(preamble=prompt, examples=())
        blocks = [lines[a:b] for a, b in zip(starts, [*starts[1:], len(lines)], strict=True)]
        return cls(
            preamble="\n".join(lines[: starts[0]]),
            examples=tuple(_example(block) for block in blocks),
        )

    def prompt(self, chosen: Sequence[Example]) -> str:
        """The preamble and ``chosen`` blocks in the given order, ending in a newline (the
        same shape as the full prompt, so the planner appends its tail as before)."""
        return "\n".join([self.preamble, *(example.text for example in chosen)]) + "\n"


def _example(lines: list[str]) -> Example:
    text = "\n".join(lines).rstrip("\n")
    instruction = next(
        (m.group(1) for line in lines[1:] if (m := _INSTRUCTION.match(line))), lines[0]
    )
    fixes = [i for i, line in enumerate(lines) if line.startswith("# fix:")]
    fix = "\n".join(lines[fixes[-1] + 1 :]) if fixes else ""
    return Example(
        text=text,
        instruction=instruction,
        repair=bool(_REPAIR_MARK.search(text)),
        fix_moves=moves(fix),
    )


# Embeddings of example instructions, computed once per process per distinct instruction
# tuple (the prompts rarely change within a process).
_EMBEDDINGS: dict[tuple[str, ...], np.ndarray] = {}
_EMBEDDINGS_LOCK = threading.Lock()


class ExampleRetriever:
    """Chooses a bank's examples by cosine similarity of MiniLM embeddings.

    The example embeddings are computed on first use and shared by every retriever of the
    same bank in the process; each call then encodes only the instruction (about 20 ms on
    one CPU thread, see ``corrections.embedder``).
    """

    def __init__(
        self, bank: ExampleBank, embedder: Embedder | None = None, *, ignore_colours: bool = False
    ) -> None:
        self.bank = bank
        self.embedder = embedder or Embedder()
        # Measure similarity without colour words: "a point 8cm left of the red bowl" is like
        # "a point 10cm left of the green bowl", not like "5cm in front of the red bowl".
        self.ignore_colours = ignore_colours

    def similarities(self, instruction: str) -> np.ndarray:
        """Cosine similarity of ``instruction`` to every example, in bank order."""
        if not self.bank.examples:
            return np.zeros(0, np.float32)
        query = self.embedder.encode([self._text(instruction)])[0]
        return self._example_vectors() @ query

    def _text(self, instruction: str) -> str:
        return _COLOUR_WORD.sub("", instruction) if self.ignore_colours else instruction

    def choose(
        self, instruction: str, k: int, *, repair: bool = False, motion: bool = False
    ) -> list[Example]:
        """The ``k`` examples most similar to ``instruction``, least similar first (ties in
        bank order); repair examples only when ``repair``, and then only those whose fix
        moves when ``motion`` (see the module docstring)."""
        if k <= 0:
            return []
        scores = self.similarities(instruction)
        allowed = [
            i
            for i, ex in enumerate(self.bank.examples)
            if (repair or not ex.repair) and not (motion and ex.repair and not ex.fix_moves)
        ]
        best = sorted(allowed, key=lambda i: (-float(scores[i]), i))[:k]
        ordered = sorted(best, key=lambda i: (float(scores[i]), -i))
        return [self.bank.examples[i] for i in ordered]

    def prompt_for(
        self, instruction: str, k: int, *, repair: bool = False, motion: bool = False
    ) -> str:
        """The main prompt with the ``k`` examples chosen for ``instruction``."""
        return self.bank.prompt(self.choose(instruction, k, repair=repair, motion=motion))

    def _example_vectors(self) -> np.ndarray:
        key = tuple(self._text(example.instruction) for example in self.bank.examples)
        with _EMBEDDINGS_LOCK:
            if key not in _EMBEDDINGS:
                _EMBEDDINGS[key] = self.embedder.encode(list(key))
            return _EMBEDDINGS[key]
