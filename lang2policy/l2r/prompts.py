"""The prompts of the Language to Rewards planner, loaded from ``config/prompts/l2r/``.

- ``descriptor.txt``: the robot and table, the motion template (its ``{motion_template}``
  placeholder is filled from ``template.TEMPLATE``) and the rules of the description.
- ``coder.txt``: the reward API (``{api}``, from ``api.REWARD_API``) and the rules of the code.
- ``examples.txt``: example conversations (objects line, then turns of ``User:`` instruction,
  description and code), separated by blank lines. The descriptor sees them without the code,
  the coder sees only (description, code) pairs.

Every prompt shows every example. For small completion models the descriptor's prompt then
repeats the ``NEAREST`` examples most like the instruction, the best one last
(``nearest_examples``): a base model copies the nearest pattern. The fixed text comes first,
so a llama.cpp server reuses it between requests and evaluates only the tail. Lengths in
instructions get their value in metres appended (``annotate``), in the examples and the live
conversation alike: "10 cm" reads "10 cm (0.1 m)".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from lang2policy.errors import ConfigError
from lang2policy.l2r.api import prompt_api
from lang2policy.l2r.template import template_text
from lang2policy.paths import config_dir
from lang2policy.planning.prompts import fill

_FILES = ("descriptor.txt", "coder.txt", "examples.txt")
NEAREST = 1
_LENGTH = re.compile(
    r"(?<![\w.])(\d+(?:\.\d+)?)\s*(cm|mm|centimet(?:er|re)s?|millimet(?:er|re)s?)(/s)?\b(?!\s*\()",
    re.IGNORECASE,
)
_CODE_BLOCK = re.compile(r"\[start of code\].*?\[end of code\]\n?", re.DOTALL)
_STOPWORD_TEXT = """a an the to and of on in at it its by with from for is be this that now please
then do block blocks bowl bowls m cm mm x y z red green blue yellow orange purple pink cyan brown
gray grey"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def default_prompt_dir() -> Path:
    return config_dir() / "prompts" / "l2r"


def annotate(instruction: str) -> str:
    """Append lengths in metres: "lift it 10 cm" -> "lift it 10 cm (0.1 m)"."""

    def metres(match: re.Match[str]) -> str:
        value, unit, per_second = float(match.group(1)), match.group(2).lower(), match.group(3)
        scale = 0.01 if unit.startswith("c") else 0.001
        return f"{match.group(0)} ({value * scale:g} m{per_second or ''})"

    return _LENGTH.sub(metres, instruction)


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]+", text.lower()) if w not in _STOPWORDS}


@dataclass(frozen=True)
class Example:
    """One example conversation."""

    text: str  # as in the file (descriptions and code)

    @property
    def instructions(self) -> list[str]:
        return [
            line[len("User: ") :] for line in self.text.splitlines() if line.startswith("User: ")
        ]

    def without_code(self) -> str:
        return _CODE_BLOCK.sub("", self.text).rstrip("\n")

    def code_pairs(self) -> str:
        """The example's (description, code) blocks, without instructions and objects."""
        return "\n".join(
            line for line in self.text.splitlines() if not line.startswith(("User: ", "objects: "))
        )

    def score(self, instruction: str) -> float:
        """Jaccard similarity of the words of the instruction and of the example's closest
        instruction (stop words, colours and units left out)."""
        words = _words(instruction)
        return max(
            (len(words & w) / len(words | w) for i in self.instructions if (w := _words(i))),
            default=0.0,
        )


def _annotated_users(text: str) -> str:
    return "\n".join(
        f"User: {annotate(line[6:])}" if line.startswith("User: ") else line
        for line in text.splitlines()
    )


@dataclass(frozen=True)
class RewardPrompts:
    descriptor: str  # the descriptor's instructions (template and rules)
    coder: str  # the coder's instructions (API and rules)
    examples: tuple[Example, ...] = ()
    source: str = ""

    @classmethod
    def load(cls, directory: str | Path | None = None) -> RewardPrompts:
        """Read the prompt files of ``directory`` (default ``config/prompts/l2r``)."""
        folder = Path(directory) if directory is not None else default_prompt_dir()
        missing = [name for name in _FILES if not (folder / name).is_file()]
        if missing:
            raise ConfigError(
                f"prompt folder {folder} lacks {', '.join(missing)}; it needs {', '.join(_FILES)}"
            )

        def read(name: str) -> str:
            text = (folder / name).read_text(encoding="utf-8").strip("\n")
            return fill(text, motion_template=template_text(), api=prompt_api())

        examples = tuple(
            Example(_annotated_users(block.strip("\n")))
            for block in re.split(r"\n\s*\n", read("examples.txt"))
            if block.strip()
        )
        if not examples:
            raise ConfigError(f"{folder / 'examples.txt'} holds no example conversations")
        return cls(read("descriptor.txt"), read("coder.txt"), examples, str(folder))

    def nearest_examples(self, instruction: str, count: int = NEAREST) -> list[Example]:
        """The ``count`` examples most like ``instruction``, the most alike last (file order
        among equals)."""
        ranked = sorted(
            range(len(self.examples)), key=lambda i: (-self.examples[i].score(instruction), i)
        )[:count]
        return [self.examples[i] for i in reversed(ranked)]

    def descriptor_prompt(self, instruction: str | None = None) -> str:
        """The descriptor's instructions and examples (without code), then, when
        ``instruction`` is given, the nearest examples again."""
        blocks = "\n\n".join(e.without_code() for e in self.examples)
        text = f"{self.descriptor}\n\nExamples:\n\n{blocks}\n"
        if instruction is not None:
            nearest = "\n\n".join(e.without_code() for e in self.nearest_examples(instruction))
            text += f"\nThe most similar example:\n\n{nearest}\n"
        return text

    def fixed_prompts(self) -> list[str]:
        """The descriptor's and the coder's prompt parts that no instruction changes (what
        ``llm.warm.warm_up`` processes at start-up)."""
        return [self.descriptor_prompt(), self.coder_prompt()]

    def coder_prompt(self) -> str:
        """The coder's fixed part: instructions and (description, code) examples."""
        blocks = "\n\n".join(e.code_pairs() for e in self.examples)
        return f"{self.coder}\n\nExamples:\n\n{blocks}\n"
