"""The few-shot prompts of the Code-as-Policies planner, loaded from plain-text files.

``config/prompts/cap/`` holds one file per prompt, each sent after the shared ``header.txt``
(what the table is, ``import numpy as np``, and the robot API: its ``{api}`` placeholder is
replaced by ``lang2policy.skills.catalog.prompt_api()``):

- ``main.txt``: the planner's examples: an ``objects = [...]`` context line, the instruction as
  a ``# comment`` and the code that carries it out.
- ``fgen.txt``: the function-writing prompt (``# define function: <call>.`` then a ``def``).
- ``parse_<name>.txt``: small parsing sub-prompts (a description in, code that sets ``ret_val``
  out), e.g. ``parse_obj_name`` and ``parse_position``; see ``codegen`` for how they run.
- ``repair.txt``: the tail of the repair prompt, with ``{code}``, ``{feedback}`` and
  ``{instruction}``.
- ``repair_examples.txt`` (optional): more repair examples in ``main.txt``'s form, offered
  only to repair prompts built from retrieved examples (``examples.ExampleRetriever``): a
  failed plan fixed by the motion it should have made. The fixed ``main.txt`` prompt (the
  ungrounded baseline) does not include them.

Every prompt keeps its fixed part first, so that a llama.cpp server reuses the processed prefix
and only the scene, history and instruction at the end are new on each call; the shared header
keeps most of that prefix when the planner switches between the prompts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from lang2policy.errors import ConfigError
from lang2policy.paths import config_dir
from lang2policy.skills.catalog import prompt_api
from lang2policy.text_quote import prompt_quote

_PLACEHOLDER = re.compile(r"\{(\w+)\}")
_REQUIRED = ("header.txt", "main.txt", "fgen.txt", "repair.txt")


def default_prompt_dir() -> Path:
    return config_dir() / "prompts" / "cap"


def fill(template: str, **values: str) -> str:
    """Replace ``{name}`` for the given names in one pass (other braces are left alone, and
    braces inside the values are never expanded)."""
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), template)


def objects_line(objects: list[str]) -> str:
    """The prompts' context line, ``objects = ['red block', 'blue bowl']``: each name a Python
    literal through ``prompt_quote`` (what ``repr`` of the list gives for ordinary names)."""
    return f"objects = [{', '.join(prompt_quote(name, literal=True) for name in objects)}]"


@dataclass(frozen=True)
class PromptSet:
    """The planner's prompts, ready to send (the API section already filled in)."""

    main: str
    function: str
    repair: str
    parsers: dict[str, str] = field(default_factory=dict)
    source: str = ""
    repair_examples: str = ""  # example blocks only (no header)

    @classmethod
    def load(cls, directory: str | Path | None = None, api: str | None = None) -> PromptSet:
        """Read the prompt files of ``directory`` (default ``config/prompts/cap``)."""
        folder = Path(directory) if directory is not None else default_prompt_dir()
        missing = [name for name in _REQUIRED if not (folder / name).is_file()]
        if missing:
            raise ConfigError(
                f"prompt folder {folder} lacks {', '.join(missing)}; it needs "
                f"{', '.join(_REQUIRED)} and optional parse_<name>.txt sub-prompts"
            )
        api = prompt_api() if api is None else api

        header = fill((folder / "header.txt").read_text(encoding="utf-8"), api=api)

        def read(name: str) -> str:
            text = fill((folder / name).read_text(encoding="utf-8"), api=api)
            return header + text

        parsers = {path.stem: read(path.name) for path in sorted(folder.glob("parse_*.txt"))}
        extra = folder / "repair_examples.txt"
        return cls(
            main=read("main.txt"),
            function=read("fgen.txt"),
            repair=fill((folder / "repair.txt").read_text(encoding="utf-8"), api=api),
            parsers=parsers,
            source=str(folder),
            repair_examples=extra.read_text(encoding="utf-8") if extra.is_file() else "",
        )
