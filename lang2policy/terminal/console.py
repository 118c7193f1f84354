"""The terminal's dispatcher: typed lines in, messages and service calls out, history kept.

``Console`` is independent of ROS: it talks to the graph through a ``Backend`` (the
ROS node implements it) and is fed status messages and the perceived objects by whoever
subscribes to them. Those may arrive on another thread; the console's lock and condition make
``handle_line``, ``on_status``, ``on_objects`` and ``wait_outcome`` safe to call from different
threads.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from lang2policy.graph.topics import OBJECTS
from lang2policy.instruction_text import text_problem, utf8_problem
from lang2policy.sandbox.outcome import printable
from lang2policy.terminal.commands import HELP, CommandKind, TerminalInputError, parse_line
from lang2policy.terminal.planview import (
    HISTORY_PROGRAM_LINES,
    INDENT,
    program_lines,
    scene_line,
    verdict_words,
)
from lang2policy.terminal.render import prompt_label, render_toolbar, toolbar_segments
from lang2policy.terminal.status import Notice, StatusModel, same_text
from lang2policy.text_quote import one_line

SERVICES = {
    CommandKind.STOP: "stop",
    CommandKind.RESUME: "resume",
    CommandKind.RESET: "reset",
    CommandKind.MEMORY: "memory",
    CommandKind.FORGET: "forget",
}
SERVICE_OWNERS = {"reset": "sim", "memory": "planner", "forget": "planner"}  # else safety
LISTING_SERVICES = frozenset({"memory"})  # answers of one line per item
MAX_ANSWER_LINES = 60  # of such an answer
STALE_OBJECTS = 5.0  # s after which :scene says how old the objects it shows are


@dataclass(frozen=True)
class ServiceAnswer:
    """What a Trigger service said; ``answered`` is False when no server responded in time."""

    answered: bool
    success: bool = False
    message: str = ""


class Backend(Protocol):
    """Where the console's commands go (the ROS node: topics and Trigger services)."""

    def publish_instruction(self, text: str) -> None: ...

    def publish_correction(self, text: str) -> None: ...

    def call_service(self, which: str) -> ServiceAnswer:
        """Call ``which`` (stop | resume | reset) and return its answer."""
        ...

    def service_name(self, which: str) -> str: ...


@dataclass
class HistoryEntry:
    """One thing sent from this console and, for instructions, how the planner answered."""

    kind: str
    text: str
    outcome: str = "sent"
    ok: bool | None = None  # None until the final answer (instructions) or the service reply
    program: str = ""  # the code the planner ran for it (or its reward spec's task)
    verdict: str = ""  # the planner's verdict, when it stated one

    def line(self, number: int) -> str:
        text = f" {self.text}" if self.text else ""
        return f"{number:3d}. {self.kind}{':' if text else ''}{text} -> {self.outcome}"

    def lines(self, number: int) -> list[str]:
        """``line`` and, under it, the first lines of the program (indented, escaped)."""
        program = program_lines(self.program, " " * 7 + "| ", HISTORY_PROGRAM_LINES)
        return [self.line(number), *program]


@dataclass
class Reply:
    """What handling one line produced: lines to print, the history entry, whether to quit."""

    lines: list[str] = field(default_factory=list)
    entry: HistoryEntry | None = None
    ok: bool = True
    quit: bool = False


class Console:
    """Parses lines, dispatches them to the backend, folds status messages, keeps history."""

    def __init__(
        self,
        backend: Backend,
        emit: Callable[[str], None] = print,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.backend, self.emit, self.clock = backend, emit, clock
        self.model = StatusModel()
        self.history: list[HistoryEntry] = []
        self.objects: dict[str, tuple[float, ...]] | None = None  # None until first heard
        self.objects_at = 0.0
        self._changed = threading.Condition()

    def on_status(self, text: str) -> Notice | None:
        """Fold one status or safety message; print its lines (if any) through ``emit``, under
        the lock, so no other line (the next echo of a script) comes between them."""
        with self._changed:
            event = self.model.fold(text)
            if event is None:
                return None
            if event.final:
                self._settle(event)
            elif event.state == "correction":
                self._acknowledge(event)
            elif event.state == "plan" and event.source == "planner":
                self._note_plan(event)
            for line in event.lines:  # under the lock: a waiter goes on after the last line
                self.emit(line)
            self._changed.notify_all()
        return event

    def on_objects(self, objects: Mapping[str, Sequence[float]]) -> None:
        """The objects perception sees now (name -> position); the first time they arrive
        after start they are printed, later ones only update what ``:scene`` shows."""
        positions = {name: tuple(float(v) for v in position) for name, position in objects.items()}
        with self._changed:
            first = self.objects is None
            self.objects, self.objects_at = positions, self.clock()
        if first:
            self.emit(scene_line(positions, OBJECTS.name))

    def scene_lines(self) -> list[str]:
        """What ``:scene`` prints: the objects and, when they are old, how old."""
        with self._changed:
            line = scene_line(self.objects, OBJECTS.name)
            age = self.clock() - self.objects_at
            if self.objects is not None and age > STALE_OBJECTS:
                line += f" (last heard {age:.0f} s ago)"
        return [line]

    def _note_plan(self, event: Notice) -> None:
        """The plan about to run for an open instruction: kept for ``:history``."""
        entry = self._open_instruction(event)
        if entry is not None:
            entry.program = event.program

    def _settle(self, event: Notice) -> None:
        """Record the planner's final answer on the oldest open instruction it answers."""
        entry = self._open_instruction(event)
        if entry is None:
            return
        entry.ok, entry.outcome, entry.verdict = event.ok, event.state, event.verdict
        if event.verdict:
            entry.outcome += f": {verdict_words(event.verdict)}"
        entry.program = event.program or entry.program

    def _open_instruction(self, event: Notice) -> HistoryEntry | None:
        """The oldest instruction still waiting for its answer that ``event`` is about."""
        for entry in self.history:
            if (
                entry.kind == CommandKind.INSTRUCTION
                and entry.ok is None
                and _answers(event, entry)
            ):
                return entry
        return None

    def _acknowledge(self, event: Notice) -> None:
        """The planner took up a correction: say so in its history entry."""
        for entry in self.history:
            open_correction = entry.kind == CommandKind.CORRECTION and entry.outcome == "sent"
            if open_correction and same_text(entry.text) == event.instruction:
                entry.outcome = "taken up by the planner"
                return

    def task_running(self) -> bool:
        with self._changed:
            return self.model.task_running(self.clock())

    def toolbar(self, width: int | None = None) -> str:
        with self._changed:
            return render_toolbar(toolbar_segments(self.model), width)

    def segments(self) -> list[tuple[str, str]]:
        with self._changed:
            return toolbar_segments(self.model)

    def prompt(self) -> str:
        return prompt_label(self.task_running())

    def handle_line(self, line: str) -> Reply:
        """Parse ``line`` and carry it out; bad input gives a message, never an exception.

        A line read with ``surrogateescape`` holds a lone surrogate for each byte that was not
        UTF-8: it is refused with that byte's offset before anything else looks at it. The text
        of an instruction or correction must pass the planner's own check (``text_problem``:
        no line breaks such as U+2028, no other non-printable characters), and a message that
        quotes the line is quoted with ``one_line``, so it prints as one line."""
        problem = utf8_problem(line, "line")
        if problem is not None:
            return Reply([f"! {problem}"], ok=False)
        try:
            command = parse_line(line, self.task_running())
        except TerminalInputError as exc:
            return Reply([f"! {one_line(str(exc))}"], ok=False)
        if command is None:
            return Reply()
        problem = text_problem(command.text, command.kind.value) if command.text else None
        if problem is not None:
            return Reply([f"! {problem}"], ok=False)
        if command.kind == CommandKind.QUIT:
            return Reply(quit=True)
        if command.kind == CommandKind.HELP:
            return Reply(HELP.splitlines())
        if command.kind == CommandKind.HISTORY:
            return Reply(self.history_lines())
        if command.kind == CommandKind.SCENE:
            return Reply(self.scene_lines())
        if command.kind in SERVICES:
            return self._call(SERVICES[command.kind])
        return self._send(command.kind, command.text)

    def _send(self, kind: CommandKind, text: str) -> Reply:
        with self._changed:
            entry = HistoryEntry(kind.value, text)
            self.history.append(entry)
            if kind == CommandKind.INSTRUCTION:
                self.model.note_sent(text, self.clock())
        if kind == CommandKind.INSTRUCTION:
            self.backend.publish_instruction(text)
        else:
            self.backend.publish_correction(text)
            entry.ok = True
        return Reply([f"-> {kind.value}: {text}"], entry)

    def _call(self, which: str) -> Reply:
        entry = HistoryEntry(which, "")
        with self._changed:
            self.history.append(entry)
        answer = self.backend.call_service(which)
        entry.ok = answer.answered and answer.success
        if not answer.answered:
            owner = SERVICE_OWNERS.get(which, "safety")
            entry.outcome = "no answer"
            message = f"! no {owner} node answering on {self.backend.service_name(which)}"
            return Reply([message], entry, ok=False)
        # it came over the network: printable, one line (the memory's listing: one per
        # record, at most MAX_ANSWER_LINES)
        texts = answer.message.splitlines() if which in LISTING_SERVICES else [answer.message]
        lines = [x for x in (printable(" ".join(t.split())) for t in texts) if x]
        lines = lines[:MAX_ANSWER_LINES]
        said = lines[0] if lines else ""
        entry.outcome = ("ok" if answer.success else "refused") + (f": {said}" if said else "")
        verdict = "ok" if answer.success else "REFUSED"
        line = f"{which}: {verdict}" + (f" — {said}" if said else "")
        return Reply([line, *(INDENT + x for x in lines[1:])], entry, ok=answer.success)

    def history_lines(self) -> list[str]:
        with self._changed:
            if not self.history:
                return ["(nothing sent yet)"]
            return [line for i, e in enumerate(self.history, start=1) for line in e.lines(i)]

    def wait_outcome(self, entry: HistoryEntry, timeout: float) -> bool | None:
        """Block until the planner's final answer to the instruction ``entry``: True for done,
        False for failed / rejected / busy, None when ``timeout`` s passed without one."""
        with self._changed:
            if self._changed.wait_for(lambda: entry.ok is not None, timeout):
                return entry.ok
            entry.ok, entry.outcome = False, f"no answer within {timeout:g} s"
            return None


def _answers(event: Notice, entry: HistoryEntry) -> bool:
    """The planner echoes the instruction; a rejected one is echoed cut to 200 characters."""
    text = same_text(entry.text)
    if event.instruction == text:
        return True
    return (
        event.state == "rejected"
        and bool(event.instruction)
        and text.startswith(event.instruction.rstrip("…"))
    )
