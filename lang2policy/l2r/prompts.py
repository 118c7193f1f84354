"""The two prompts of the Language to Rewards planner, loaded from ``config/prompts/l2r/``.

- ``descriptor.txt``: the motion descriptor: what the robot is, the template (its
  ``{motion_template}`` placeholder is filled from ``template.TEMPLATE``), the rules and example
  conversations; the conversation of the session follows it.
- ``coder.txt``: the reward coder: the reward API (``{api}``, generated from
  ``api.REWARD_API``), the rules and examples of descriptions turned into code.

Both keep their fixed part first, so that a llama.cpp server reuses the processed prefix.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lang2policy.errors import ConfigError
from lang2policy.l2r.api import prompt_api
from lang2policy.l2r.template import template_text
from lang2policy.paths import config_dir
from lang2policy.planning.prompts import fill

_FILES = ("descriptor.txt", "coder.txt")


def default_prompt_dir() -> Path:
    return config_dir() / "prompts" / "l2r"


@dataclass(frozen=True)
class RewardPrompts:
    descriptor: str
    coder: str
    source: str = ""

    @classmethod
    def load(cls, directory: str | Path | None = None) -> RewardPrompts:
        """Read the prompt files of ``directory`` (default ``config/prompts/l2r``)."""
        folder = Path(directory) if directory is not None else default_prompt_dir()
        missing = [name for name in _FILES if not (folder / name).is_file()]
        if missing:
            raise ConfigError(f"prompt folder {folder} lacks {', '.join(missing)}; it needs "
                              f"{', '.join(_FILES)}")

        def read(name: str) -> str:
            text = (folder / name).read_text(encoding="utf-8")
            return fill(text, motion_template=template_text(), api=prompt_api()).rstrip("\n") + "\n"

        return cls(read("descriptor.txt"), read("coder.txt"), str(folder))
