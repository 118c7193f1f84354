"""What a line typed at the lang2policy terminal means: an instruction, a correction or a command.

``:stop`` (and the bare words ``stop`` / ``halt``) never reach a language model: they become a
call of the safety node's stop service. ``:do TEXT`` / ``:fix TEXT`` force an instruction or a
correction; plain text is a correction while a task runs and an instruction otherwise (the caller
knows which, from the live status).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from lang2policy.errors import Lang2PolicyError

# The planner's limit (lang2policy.planning.route.MAX_INSTRUCTION, checked equal by the tests);
# not imported, because importing the planning package costs the terminal's start half a second.
MAX_TEXT = 500


class TerminalInputError(Lang2PolicyError):
    """A typed line was refused (empty text, too long, control characters, unknown command)."""


class CommandKind(StrEnum):
    """Everything a line can ask for."""

    INSTRUCTION = "instruction"
    CORRECTION = "correction"
    STOP = "stop"
    RESUME = "resume"
    RESET = "reset"
    HISTORY = "history"
    MEMORY = "memory"
    FORGET = "forget"
    SCENE = "scene"
    HELP = "help"
    QUIT = "quit"


@dataclass(frozen=True)
class Command:
    """One parsed line: its kind and, for instructions and corrections, the text to send."""

    kind: CommandKind
    text: str = ""


STOP_WORDS = frozenset({"stop", "halt"})

# ":name" -> kind; the texts of :do / :fix are checked by check_text.
COLON_COMMANDS: dict[str, CommandKind] = {
    "stop": CommandKind.STOP,
    "halt": CommandKind.STOP,
    "resume": CommandKind.RESUME,
    "reset": CommandKind.RESET,
    "history": CommandKind.HISTORY,
    "memory": CommandKind.MEMORY,
    "forget": CommandKind.FORGET,
    "scene": CommandKind.SCENE,
    "objects": CommandKind.SCENE,
    "help": CommandKind.HELP,
    "h": CommandKind.HELP,
    "?": CommandKind.HELP,
    "quit": CommandKind.QUIT,
    "q": CommandKind.QUIT,
    "exit": CommandKind.QUIT,
    "do": CommandKind.INSTRUCTION,
    "fix": CommandKind.CORRECTION,
}

KNOWN = (
    ":stop, :resume, :reset, :do TEXT, :fix TEXT, :scene, :history, :memory, :forget, :help, :quit"
)

HELP = """\
Type what the robot should do, in plain language. While a task runs, plain text is sent as a
correction of it ("a bit higher", "no, the blue one"); otherwise it is a new instruction.
  stop, halt, :stop   stop the robot now (safety node; no language model involved)
  :resume             release the stop latch
  :reset              reset the simulated scene
  :do TEXT            send TEXT as a new instruction, even while a task runs
  :fix TEXT           send TEXT as a correction of the running task
  :scene              the objects on the table and where they are (as perception sees them)
  :history            each instruction from this terminal: its program and how it ended
  :memory             the corrections the planner remembers and re-applies to similar tasks
  :forget             forget every remembered correction
  :help               this text
  :quit, Ctrl-D       leave (Ctrl-C too)"""


def check_text(text: str, what: str = "instruction") -> str:
    """``text`` stripped; a ``TerminalInputError`` saying what is wrong when it is empty, longer
    than ``MAX_TEXT`` characters or holds control characters."""
    text = text.strip()
    if not text:
        raise TerminalInputError(f"the {what} is empty; say what the robot should do")
    if len(text) > MAX_TEXT:
        raise TerminalInputError(
            f"the {what} has {len(text)} characters; at most {MAX_TEXT} are allowed"
        )
    bad = sorted({f"0x{ord(c):02x}" for c in text if (ord(c) < 32 and c != "\t") or c == "\x7f"})
    if bad:
        raise TerminalInputError(
            f"the {what} contains control characters ({', '.join(bad)}); use plain text"
        )
    return text


def parse_line(line: str, task_running: bool) -> Command | None:
    """The command a typed ``line`` means; None for a blank line (nothing to do).

    ``task_running`` decides where plain text goes: a correction while a task runs, else an
    instruction. Raises ``TerminalInputError`` for an unknown ``:command`` or bad text.
    """
    stripped = line.strip()
    if not stripped:
        return None
    if stripped.lower().rstrip("!.") in STOP_WORDS:
        return Command(CommandKind.STOP)
    if stripped.startswith(":"):
        return _colon_command(stripped[1:])
    kind = CommandKind.CORRECTION if task_running else CommandKind.INSTRUCTION
    return Command(kind, check_text(stripped, kind.value))


def _colon_command(body: str) -> Command:
    name, _, argument = body.partition(" ")
    kind = COLON_COMMANDS.get(name.lower())
    if kind is None:
        raise TerminalInputError(f"unknown command ':{name}'; the commands are {KNOWN}")
    if kind in (CommandKind.INSTRUCTION, CommandKind.CORRECTION):
        return Command(kind, check_text(argument, kind.value))
    if argument.strip():
        raise TerminalInputError(f"':{name}' takes no argument, got {argument.strip()!r}")
    return Command(kind)
