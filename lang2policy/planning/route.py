"""Which planner takes an instruction: Code as Policies ("code") or Language to Rewards ("reward").

``choose_planner(instruction, setting)`` returns ``setting`` when it is "code" or "reward"; for
"auto" it applies a fixed, deterministic rule on the words of the instruction:

1. a question ("where is the red block?", "how many blocks ...") -> code;
2. several objects or steps ("all the blocks", "each", "then", "stack", "sort") -> code:
   sequences of discrete picks and places are what policy code is good at;
   and a block placed by an offset or a relation ("move the red block 10 cm to the left",
   "put the red block between the bowls") -> code: the instruction reader resolves the spot
   from the scene (``planning.spatial_phrases``) and checks it after;
3. a continuous or quantitative motion goal -> reward: heights and distances ("lift ... 10 cm",
   "higher", "lower"), speeds ("slowly", "faster"), staying above or away ("hover", "keep ...
   above", "avoid", "stay away"), pushing, turning and uprighting, and relative corrections
   ("a bit more", "less");
4. anything else (a single pick and place, "put the red block in the blue bowl") -> code.

``check_instruction`` is the shared check of an incoming instruction (both planners use it);
``text_problem`` its text part, which the terminal applies to every typed line too.
"""

from __future__ import annotations

import re

from lang2policy.errors import ConfigError, Lang2PolicyError
from lang2policy.instruction_text import text_problem, utf8_problem

__all__ = [
    "MAX_INSTRUCTION",
    "SETTINGS",
    "check_instruction",
    "choose_planner",
    "is_question",
    "text_problem",
    "utf8_problem",
]

SETTINGS = ("code", "reward", "auto")
MAX_INSTRUCTION = 500

_QUESTION = re.compile(
    r"\?\s*$|^(what|where|which|who|how|is|are|does|do|can|could|tell me)\b", re.IGNORECASE
)
_POLITE_REQUEST = re.compile(
    r"^(please\s+)?(can|could|would|will)\s+you\s+(please\s+)?(put|place|move|drop|stack|push|"
    r"pick|bring|set|slide|lift|grab|take|get|sort|arrange|turn|rotate|carry|transfer)\b",
    re.IGNORECASE,
)
_SEQUENCE = re.compile(
    r"\b(all|each|every|both|then|after that|stack|sort|arrange|line up|in a line|one by one|"
    r"matching)\b|\bblocks\b|\bbowls\b",
    re.IGNORECASE,
)
# A block picked and placed at a spot named by an offset or a relation (not pushed, not held).
_PLACEMENT = re.compile(
    r"\b(put|place|move|set|bring|take|shift|carry|drop|position)\b.*\bblock\b.*"
    r"\b(to the (left|right)|(left|right)ward|left|right|between|back|closer|nearer|toward"
    r"|towards|away from|forwards?|backwards?|corner|side|edge|next to|beside|behind|in front)\b",
    re.IGNORECASE,
)
_NOT_PLACEMENT = re.compile(
    r"\b(push\w*|slow\w*|fast\w*|quick\w*|gentl\w*|lift\w*|rais\w*|hover\w*|hold\w*|"
    r"keep|stay|avoid\w*|turn\w*|rotat\w*|upright|gripper|arm)\b",
    re.IGNORECASE,
)
_CONTINUOUS = re.compile(
    r"\d+(\.\d+)?\s*(cm|mm|m|centimet\w*|millimet\w*|met\w*|deg\w*|°|m/s|s|sec\w*)\b"
    r"|\b(lift|raise|hold\w*|higher|lower|hover\w*|above|keep|stay\w*|avoid\w*|"
    r"away from|slow\w*|fast\w*|quick\w*|speed|gentl\w*|push\w*|nudge|slide|turn\w*|rotat\w*|"
    r"spin|upright|stand|yaw|heading|more|less|bit|further|farther|closer)\b",
    re.IGNORECASE,
)


def choose_planner(instruction: str, setting: str = "auto") -> str:
    """The planner ("code" or "reward") for ``instruction`` under ``setting`` ("code",
    "reward" or "auto")."""
    if setting not in SETTINGS:
        raise ConfigError(f"planner setting {setting!r} is not one of {list(SETTINGS)}")
    if setting != "auto":
        return setting
    text = " ".join(str(instruction or "").split())
    if _QUESTION.search(text) or _SEQUENCE.search(text):
        return "code"
    if _PLACEMENT.search(text) and not _NOT_PLACEMENT.search(text):
        return "code"
    return "reward" if _CONTINUOUS.search(text) else "code"


def is_question(instruction: str) -> bool:
    """True for a question ("where is the red block?"): nothing to move, an answer to say. A
    polite request ("could you put the red block in the bowl?") is not one."""
    text = " ".join(str(instruction or "").split())
    return bool(_QUESTION.search(text)) and not _POLITE_REQUEST.search(text)


def check_instruction(text: object) -> str:
    """The instruction, stripped; a clear error when it is empty, too long or not one line of
    printable UTF-8 text (``text_problem``)."""
    if text is not None and not isinstance(text, str):
        raise Lang2PolicyError(f"the instruction must be text, got {type(text).__name__}")
    text = (text or "").strip()
    if not text:
        raise Lang2PolicyError("the instruction is empty; say what the robot should do")
    if len(text) > MAX_INSTRUCTION:
        raise Lang2PolicyError(
            f"the instruction has {len(text)} characters; at most {MAX_INSTRUCTION} are allowed"
        )
    problem = text_problem(text)
    if problem is not None:
        raise Lang2PolicyError(problem)
    return text
