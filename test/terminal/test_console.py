"""The terminal's dispatcher and its two front ends, without ROS.

The backend here is the ROS edge replaced by a recorder; where a planner must answer, an
in-process stand-in folds the planner's status messages back in from another thread, the way
the ROS subscription does.
"""

from __future__ import annotations

import json
import threading

import pytest

from lang2policy.terminal import Console, ServiceAnswer, run_non_interactive
from lang2policy.terminal.app import _formatted_toolbar, run_interactive


class RecordingBackend:
    """Records what the console sent; services answer as configured; an optional planner
    stand-in answers instructions with status messages from a thread."""

    def __init__(self, services: dict[str, ServiceAnswer] | None = None, planner=None) -> None:
        self.sent: list[tuple[str, str]] = []
        self.services = services or {}
        self.planner = planner
        self.console: Console | None = None

    def publish_instruction(self, text: str) -> None:
        self.sent.append(("instruction", text))
        if self.planner is not None:
            threading.Thread(target=self.planner, args=(self.console, text), daemon=True).start()

    def publish_correction(self, text: str) -> None:
        self.sent.append(("correction", text))

    def call_service(self, which: str) -> ServiceAnswer:
        self.sent.append(("service", which))
        return self.services.get(which, ServiceAnswer(answered=False))

    def service_name(self, which: str) -> str:
        return f"/lang2policy/{which}"


def planner_answers(console: Console, text: str) -> None:
    """Received, running, then done, or failed for texts containing 'fail'; silent for 'hang'."""
    if "hang" in text:
        return
    final = "failed" if "fail" in text else "done"
    for state, detail in (
        ("received", {"route": "code"}),
        ("running", f"running the program for {text}"),
        (final, {"route": "code", "outcome": "ok" if final == "done" else "skill"}),
    ):
        console.on_status(json.dumps({"state": state, "instruction": text, "detail": detail}))


def make(planner=None, services=None, clock=None):
    backend = RecordingBackend(services, planner)
    printed: list[str] = []
    kwargs = {"clock": clock} if clock else {}
    console = Console(backend, emit=printed.append, **kwargs)
    backend.console = console
    return console, backend, printed


STOPPED = ServiceAnswer(True, True, "stopped: terminal request")


def test_plain_text_follows_the_task_state():
    now = [0.0]
    console, backend, _ = make(clock=lambda: now[0])
    console.handle_line("pick up the red block")
    console.handle_line("no, the blue one")  # sent a moment ago: a correction
    now[0] = 100.0  # no planner ever answered: the grace is over
    console.handle_line("wave")
    assert backend.sent == [
        ("instruction", "pick up the red block"),
        ("correction", "no, the blue one"),
        ("instruction", "wave"),
    ]


def test_stop_calls_the_service_and_never_publishes():
    console, backend, _ = make(services={"stop": STOPPED})
    reply = console.handle_line("halt")
    assert backend.sent == [("service", "stop")]
    assert reply.ok and reply.lines == ["stop: ok — stopped: terminal request"]


def test_a_missing_service_is_named():
    console, backend, _ = make()
    reply = console.handle_line(":resume")
    assert not reply.ok and reply.lines == ["! no safety node answering on /lang2policy/resume"]
    reply = console.handle_line(":reset")
    assert reply.lines == ["! no sim node answering on /lang2policy/reset"]
    assert backend.sent == [("service", "resume"), ("service", "reset")]


def test_memory_lists_the_planners_remembered_corrections_and_forget_clears_them():
    listing = "2 remembered in /m.jsonl:\nab12  'a bit to the left' (offset)\ncd34  'slower'\x1b[2J"
    console, backend, _ = make(
        services={
            "memory": ServiceAnswer(True, True, listing),
            "forget": ServiceAnswer(True, True, "forgot 2 remembered corrections"),
        }
    )
    reply = console.handle_line(":memory")
    assert reply.ok and reply.lines == [
        "memory: ok — 2 remembered in /m.jsonl:",
        "    ab12 'a bit to the left' (offset)",
        "    cd34 'slower'\\x1b[2J",
    ]
    assert console.handle_line(":forget").lines == [
        "forget: ok — forgot 2 remembered corrections"
    ]
    assert backend.sent == [("service", "memory"), ("service", "forget")]
    missing, _, _ = make()
    assert missing.handle_line(":memory").lines == [
        "! no planner node answering on /lang2policy/memory"
    ]


def test_a_refusing_service_is_reported_as_refused():
    console, _, _ = make(services={"resume": ServiceAnswer(True, False, "not\nstopped\x1b[2J")})
    reply = console.handle_line(":resume")
    assert not reply.ok and reply.lines == ["resume: REFUSED — not stopped\\x1b[2J"]
    assert console.history_lines() == ["  1. resume -> refused: not stopped\\x1b[2J"]


def test_bad_input_gets_a_message_and_sends_nothing():
    console, backend, _ = make()
    reply = console.handle_line(":launch")
    assert not reply.ok and reply.lines[0].startswith("! unknown command ':launch'")
    assert backend.sent == [] and console.history == []


def test_help_quit_and_blank():
    console, backend, _ = make()
    assert any(":resume" in line for line in console.handle_line(":help").lines)
    assert console.handle_line(":quit").quit
    assert console.handle_line("   ").lines == []
    assert backend.sent == []


def test_history_records_outcomes_as_the_planner_answers():
    console, _, printed = make(planner=planner_answers, services={"stop": STOPPED})
    entry = console.handle_line("pick up the red block").entry
    assert console.wait_outcome(entry, timeout=5.0) is True
    entry = console.handle_line(":do fail to reach the shelf").entry
    assert console.wait_outcome(entry, timeout=5.0) is False
    console.handle_line(":fix a bit higher")
    console.handle_line(":fix no, lower")
    console.on_status(json.dumps({"state": "correction", "instruction": "no, lower"}))
    console.handle_line("stop")
    assert console.history_lines() == [
        "  1. instruction: pick up the red block -> done",
        "  2. instruction: fail to reach the shelf -> failed",
        "  3. correction: a bit higher -> sent",
        "  4. correction: no, lower -> taken up by the planner",
        "  5. stop -> ok: stopped: terminal request",
    ]
    assert "[planner] done (code): pick up the red block — ok" in printed


def test_wait_outcome_times_out_with_none():
    console, _, _ = make(planner=planner_answers)
    entry = console.handle_line("hang forever").entry
    assert console.wait_outcome(entry, timeout=0.2) is None
    assert entry.outcome == "no answer within 0.2 s"


def test_non_interactive_waits_for_each_instruction_and_exits_zero_when_all_succeed():
    console, backend, printed = make(planner=planner_answers, services={"stop": STOPPED})
    lines = ["pick up the red block\n", "\n", ":fix a bit higher\n", "stop\n", "put it down\n"]
    code = run_non_interactive(console, lines, printed.append, wait=True, timeout=5.0)
    assert code == 0
    assert backend.sent == [
        ("instruction", "pick up the red block"),
        ("correction", "a bit higher"),
        ("service", "stop"),
        ("instruction", "put it down"),
    ]
    done_first = printed.index("[planner] done (code): pick up the red block — ok")
    assert done_first < printed.index("> :fix a bit higher")  # waited before the next line
    assert "stop: ok — stopped: terminal request" in printed


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (["fail at this\n"], 1),
        (["hang here\n"], 1),
        ([":bogus\n"], 1),
        (["stop\n"], 1),  # no safety node answered
        (["fine\n", ":quit\n", "fail, never read\n"], 0),
    ],
)
def test_non_interactive_exit_code(lines, expected):
    console, _, printed = make(planner=planner_answers)
    assert run_non_interactive(console, lines, printed.append, wait=True, timeout=0.3) == expected


def test_non_interactive_without_wait_sends_follow_ups_as_corrections():
    console, backend, printed = make()  # nobody answers
    lines = ["pick up the red block\n", "the blue one\n"]
    assert run_non_interactive(console, lines, printed.append, wait=False) == 0
    assert backend.sent == [
        ("instruction", "pick up the red block"),
        ("correction", "the blue one"),
    ]


def test_formatted_toolbar_fits_the_width_and_keeps_styles():
    console, _, _ = make()
    console.on_status(json.dumps({"node": "safety", "state": "stopped", "reason": "x" * 80}))
    pieces = _formatted_toolbar(console, 40)
    assert sum(len(text) for _, text in pieces) <= 39
    assert pieces[-1][1].endswith("…") and pieces[-1][0] == "class:toolbar-alert"


def test_interactive_prompt_sends_lines_and_leaves_on_ctrl_d():
    from prompt_toolkit.application import create_app_session
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    console, backend, _ = make(services={"stop": STOPPED})
    with create_pipe_input() as keys, create_app_session(input=keys, output=DummyOutput()):
        keys.send_text("pick up the red block\r:fix the blue one\rstop\r\x04")
        assert run_interactive(console, refresh_interval=0.05) == 0
    assert backend.sent == [
        ("instruction", "pick up the red block"),
        ("correction", "the blue one"),
        ("service", "stop"),
    ]


GOAL = "is_in('red block', 'yellow bowl')"
SAID_ONLY = "say('I see no blue bowl')\noutcome: ok\nsay('bye')\nsay('really')\n"


def grounded_planner(console: Console, text: str) -> None:
    """The new planner's statuses: plan (the program and its goal), said, and a final verdict;
    'ghost' in the text gives today's failure (a program that only says something)."""
    only_says = "ghost" in text
    code = SAID_ONLY if only_says else "put_first_on_second('red block', 'yellow bowl')"
    verdict, state = ("goal_not_reached", "failed") if only_says else ("goal_reached", "done")
    said = ["I see no blue bowl"] if only_says else []
    final = {"route": "code", "verdict": verdict, "goal": GOAL, "outcome": "ok"}
    final.update(message="", attempts=1, code=code, said=said, relations=[], alternatives=[])
    steps = [
        ("received", {"route": "code"}),
        ("plan", {"route": "code", "code": code, "goal": GOAL, "score": 0.5}),
        *[("said", line) for line in said],
        (state, final),
    ]
    for state_, detail in steps:
        message = {"node": "planner", "state": state_, "instruction": text, "detail": detail}
        console.on_status(json.dumps(message))


def test_scene_before_and_after_objects_and_printed_once_when_they_first_arrive():
    now = [0.0]
    console, _, printed = make(clock=lambda: now[0])
    assert console.handle_line(":scene").lines == [
        "objects: none heard yet on /lang2policy/objects; perception may not be running"
    ]
    console.on_objects({"red block": (0.4, 0.1, 0.02), "yellow\nbowl": [0.5, -0.12, 0.0]})
    first = "objects: red block at [0.40, 0.10, 0.02], yellow\\nbowl at [0.50, -0.12, 0.00]"
    assert printed == [first]  # the name from the network stays on its line
    console.on_objects({"red block": (0.45, 0.1, 0.02)})
    assert printed == [first]  # later messages only update :scene
    assert console.handle_line(":scene").lines == ["objects: red block at [0.45, 0.10, 0.02]"]
    now[0] = 30.0
    assert console.handle_line(":scene").lines == [
        "objects: red block at [0.45, 0.10, 0.02] (last heard 30 s ago)"
    ]
    console.on_objects({})
    assert console.scene_lines() == [
        "objects: none on the table (the last message on /lang2policy/objects named none)"
    ]


def test_the_plan_said_lines_and_verdict_print_before_the_next_line_of_a_script():
    console, _, printed = make(planner=grounded_planner)
    lines = ["put the ghost block in the yellow bowl\n", ":history\n"]
    assert run_non_interactive(console, lines, printed.append, wait=True, timeout=5.0) == 1
    text = "put the ghost block in the yellow bowl"
    start = printed.index(f"[planner] plan (code): {text} — about to run, goal: {GOAL}, score 0.50")
    shown = printed[start + 1 : printed.index("> :history")]
    # the reply to the typed line may come while the planner already answers
    assert [line for line in shown if not line.startswith("-> instruction")] == [
        "    | say('I see no blue bowl')",
        "    | outcome: ok",  # a program line never reads as the terminal's own
        "    | say('bye')",
        "    | say('really')",
        "robot says: I see no blue bowl",
        f"[planner] failed (code): {text} — finished but goal not reached",
        f"    goal: {GOAL}",
        "    robot said: I see no blue bowl",
    ]
    assert not any(line.startswith("outcome") or "— ok" in line for line in printed)


def test_history_shows_each_instruction_with_its_program_and_verdict():
    console, _, _ = make(planner=grounded_planner)
    for line in ("put the red block in the yellow bowl", "put the ghost block in the bowl"):
        entry = console.handle_line(line).entry
        console.wait_outcome(entry, timeout=5.0)
    console.handle_line(":fix a bit higher")
    assert console.handle_line(":history").lines == [
        "  1. instruction: put the red block in the yellow bowl -> done: goal reached",
        "       | put_first_on_second('red block', 'yellow bowl')",
        "  2. instruction: put the ghost block in the bowl -> failed: finished but goal not"
        " reached",
        "       | say('I see no blue bowl')",
        "       | outcome: ok",
        "       | say('bye')",
        "       | ...[1 more lines]",
        "  3. correction: a bit higher -> sent",
    ]
    assert [entry.verdict for entry in console.history[:2]] == ["goal_reached", "goal_not_reached"]
    assert console.history[0].ok and not console.history[1].ok
    assert "last: finished but goal not reached" in console.toolbar()


def test_help_names_scene_and_history():
    console, _, _ = make()
    help_text = "\n".join(console.handle_line(":help").lines)
    assert ":scene" in help_text and ":history" in help_text
