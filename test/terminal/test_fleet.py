"""One terminal for a fleet of arms (``lang2policy.terminal.fleet``), without ROS: each arm's
console has a recording backend; a planner stand-in answers arm2's instructions."""

from __future__ import annotations

import json
import threading

import pytest

from lang2policy.terminal import (
    Console,
    Fleet,
    ServiceAnswer,
    TerminalInputError,
    run_non_interactive,
)

OK = ServiceAnswer(True, True, "held")


class Backend:
    def __init__(self, planner: bool = False) -> None:
        self.sent: list[tuple[str, str]] = []
        self.planner = planner
        self.console: Console | None = None

    def publish_instruction(self, text: str) -> None:
        self.sent.append(("instruction", text))
        if self.planner:
            threading.Thread(target=self._answer, args=(text,), daemon=True).start()

    def _answer(self, text: str) -> None:
        for state in ("received", "done"):
            line = {"node": "planner", "state": state, "instruction": text, "detail": {}}
            self.console.on_status(json.dumps(line))

    def publish_correction(self, text: str) -> None:
        self.sent.append(("correction", text))

    def call_service(self, which: str) -> ServiceAnswer:
        self.sent.append(("service", which))
        return OK

    def service_name(self, which: str) -> str:
        return f"/arm/lang2policy/{which}"


def fleet(printed: list[str] | None = None, planner: bool = False):
    backends = {"arm1": Backend(), "arm2": Backend(planner=planner)}
    consoles = {}
    for arm, backend in backends.items():
        emit = print if printed is None else (lambda x, a=arm: printed.append(f"[{a}] {x}"))
        backend.console = consoles[arm] = Console(backend, emit)
    return Fleet(consoles), backends


def test_a_named_arm_gets_the_line_and_becomes_the_current_arm():
    terminal, backends = fleet()
    reply = terminal.handle_line("arm2: put the red block in the bowl")
    assert reply.lines == ["[arm2] -> instruction: put the red block in the bowl"]
    assert backends["arm2"].sent == [("instruction", "put the red block in the bowl")]
    assert backends["arm1"].sent == []
    assert terminal.current == "arm2" and terminal.prompt().startswith("arm2 ")
    terminal.handle_line("a bit higher")  # no name: the current arm (its task runs: a correction)
    assert backends["arm2"].sent[-1] == ("correction", "a bit higher")
    assert terminal.handle_line("arm1:").lines == ["now addressing arm1"]
    terminal.handle_line(":resume")
    assert backends["arm1"].sent == [("service", "resume")]


def test_stop_without_a_name_stops_every_arm_and_with_one_only_that_arm():
    terminal, backends = fleet()
    reply = terminal.handle_line("stop")
    assert reply.ok and reply.lines == ["[arm1] stop: ok — held", "[arm2] stop: ok — held"]
    assert all(b.sent == [("service", "stop")] for b in backends.values())
    terminal.handle_line("arm2: halt")
    assert backends["arm2"].sent[-1] == ("service", "stop") and len(backends["arm1"].sent) == 1
    terminal.handle_line("arm1: :stop")
    assert len(backends["arm1"].sent) == 2 and len(backends["arm2"].sent) == 2


def test_an_unknown_arm_name_is_refused_and_moves_nothing():
    terminal, backends = fleet()
    reply = terminal.handle_line("arm3: put the red block in the bowl")
    assert not reply.ok and "no arm named 'arm3'; the arms are arm1, arm2" in reply.lines[0]
    assert all(b.sent == [] for b in backends.values())
    terminal.handle_line(":do note: lift it")  # a colon command is never an arm's name
    assert backends["arm1"].sent == [("instruction", "note: lift it")]


def test_help_adds_the_fleet_lines_and_the_toolbar_names_the_current_arm():
    terminal, _ = fleet()
    lines = terminal.handle_line(":help").lines
    assert any("'NAME: TEXT' sends TEXT to arm NAME" in x for x in lines)
    assert terminal.segments()[0] == ("", "arm arm1")


def test_a_script_waits_for_the_outcome_from_the_arm_it_addressed():
    printed: list[str] = []
    terminal, backends = fleet(printed, planner=True)
    lines = ["arm2: put the red block in the bowl"]
    assert run_non_interactive(terminal, lines, printed.append, wait=True, timeout=5.0) == 0
    assert backends["arm2"].sent == [("instruction", "put the red block in the bowl")]
    assert any(x.startswith("[arm2] ") and "done" in x for x in printed), printed


def test_a_fleet_needs_arm_names():
    with pytest.raises(TerminalInputError, match="not arm names"):
        Fleet({"arm 1": Console(Backend())})
    with pytest.raises(TerminalInputError, match="at least one arm"):
        Fleet({})
