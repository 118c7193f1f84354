"""Folding /lang2policy/status and /lang2policy/safety messages into what the toolbar shows."""

from __future__ import annotations

import json

import pytest

from lang2policy.terminal import StatusModel, render_toolbar, toolbar_segments
from lang2policy.terminal.render import prompt_label

INSTRUCTION = "pick up the red block"


def planner(state: str, detail: object = "", instruction: str = INSTRUCTION) -> str:
    return json.dumps({"state": state, "instruction": instruction, "detail": detail})


def controller(state: str, task: str = "lift the block", rate: float = 12.34, **extra) -> str:
    stats = {"rate_hz": rate, "plan_ms_mean": 20.0}
    message = {"node": "controller", "state": state, "task": task, "stats": stats, **extra}
    return json.dumps(message)


def safety(state: str, reason: str = "") -> str:
    return json.dumps({"node": "safety", "state": state, "reason": reason})


def test_a_code_plan_from_received_to_done():
    model = StatusModel()
    event = model.fold(planner("received", {"route": "code"}))
    assert (event.source, event.state, event.final) == ("planner", "received", False)
    assert event.line == f"[planner] received (code): {INSTRUCTION}"
    assert model.plan_kind == "code" and model.task_running(now=100.0)

    line = "running the program (4 lines, 1 generated functions, 1 LLM calls in 2.1 s)"
    assert model.fold(planner("running", line)).line == f"[planner] running: {line}"
    assert model.progress == line

    done = {"route": "code", "outcome": "ok", "message": "", "code": "pick('red block')"}
    event = model.fold(planner("done", done))
    assert event.final and event.ok
    assert event.line == f"[planner] done (code): {INSTRUCTION} — ok"
    assert not model.task_running(now=100.0)
    assert model.planner_state == "done" and model.progress == "ok"


def test_a_reward_plan_shows_its_spec_task():
    model = StatusModel()
    model.fold(planner("received", {"route": "reward"}, "lift it 10 cm"))
    spec = {"version": 1, "task": "lift red block 10 cm", "terms": []}
    event = model.fold(planner("done", {"route": "reward", "spec": spec}, "lift it 10 cm"))
    assert model.plan_kind == "reward"
    assert (
        event.line == "[planner] done (reward): lift it 10 cm — reward spec: lift red block 10 cm"
    )


def test_failures_become_the_last_error_and_done_clears_it():
    model = StatusModel()
    model.fold(planner("received", {"route": "code"}))
    detail = {"route": "code", "outcome": "skill", "message": "target out of reach"}
    event = model.fold(planner("failed", detail))
    assert event.final and not event.ok
    assert model.last_error == "failed: target out of reach"
    assert event.line.endswith("— target out of reach")
    model.fold(planner("failed", "LLMTimeoutError: no answer", "again"))
    assert model.last_error == "failed: LLMTimeoutError: no answer"
    model.fold(planner("done", {"route": "code", "outcome": "ok"}, "again"))
    assert model.last_error == ""


def test_a_refused_second_instruction_does_not_end_the_running_one():
    model = StatusModel()
    model.fold(planner("received", {"route": "code"}))
    event = model.fold(planner("busy", "another instruction is running", "wave"))
    assert event.final and not event.ok and event.instruction == "wave"
    assert model.instruction == INSTRUCTION and model.planner_state == "received"
    assert model.task_running(now=0.0)
    assert "busy: wave" in model.last_error


def test_a_correction_status_keeps_the_task_running_until_it_ends():
    model = StatusModel()
    model.fold(planner("received", {"route": "reward"}))
    model.fold(planner("correction", "edited the spec: height 0.15", "higher"))
    assert model.correction == "higher" and model.instruction == INSTRUCTION
    assert model.task_running(now=0.0)
    assert "fix: higher" in render_toolbar(toolbar_segments(model))
    model.fold(planner("failed", "stopped by the safety node"))
    assert model.correction == "" and model.progress == ""
    assert not model.task_running(now=0.0)


def test_a_sent_instruction_counts_as_running_until_answered_or_the_grace_ends():
    model = StatusModel()
    model.note_sent("pick  up\tthe red block", now=10.0)
    assert model.task_running(now=12.0) and not model.task_running(now=16.0)
    model.fold(planner("received", {"route": "code"}))
    model.fold(planner("done", {"route": "code", "outcome": "ok"}))
    assert model.sent == "" and not model.task_running(now=12.0)


def test_controller_periodic_status_prints_on_change_only_and_keeps_the_rate():
    model = StatusModel()
    first = model.fold(controller("running"))
    assert first.line == "[controller] running: lift the block"
    assert model.fold(controller("running", rate=9.0)) is None
    assert model.controller_rate == 9.0
    assert model.task_running(now=0.0)  # a running MPC task takes corrections
    assert model.fold(controller("success")).line == "[controller] success: lift the block"
    assert not model.task_running(now=0.0)


def test_controller_spec_answers_always_print_and_errors_are_kept():
    model = StatusModel()
    model.fold(controller("running"))
    event = model.fold(
        json.dumps({"node": "controller", "state": "rejected", "task": "", "detail": "bad term"})
    )
    assert event.line == "[controller] rejected (bad term)"
    assert model.last_error == "controller rejected: bad term"
    assert model.controller_state == "running"  # a one-off answer is not the loop's state
    model.fold(controller("timeout", detail="30 s passed"))
    assert model.last_error == "controller timeout: 30 s passed"


def test_safety_state_changes_print_once():
    model = StatusModel()
    assert model.fold(safety("ok")).line == "[safety] ok"
    assert model.fold(safety("ok")) is None  # the 2 Hz repeat
    event = model.fold(safety("stopped", "stop service called"))
    assert event.line == "[safety] STOPPED: stop service called"
    assert model.safety_state == "stopped"


@pytest.mark.parametrize(
    "raw",
    [
        "not json {",
        "[1, 2, 3]",
        "42",
        json.dumps({"instruction": "no state"}),
        json.dumps({"state": 7}),
        "",
    ],
)
def test_malformed_messages_are_shown_raw_and_change_nothing(raw):
    model = StatusModel()
    model.fold(planner("received", {"route": "code"}))
    event = model.fold(raw)
    assert event.source == "unknown"
    assert event.line == f"[status] unrecognised message: {' '.join(raw.split())}"
    assert model.planner_state == "received" and model.plan_kind == "code"


def test_odd_but_valid_messages_do_not_crash():
    model = StatusModel()
    event = model.fold(json.dumps({"node": "perception", "state": "ok", "detail": {"fps": 9}}))
    assert event.line == '[perception] ok: {"fps": 9}'
    assert model.fold(json.dumps({"node": "recorder", "state": "recording"})).line == (
        "[recorder] recording"
    )
    model.fold(json.dumps({"state": "running", "instruction": None, "detail": [1, {"a": None}]}))
    assert model.progress == '[1, {"a": null}]'
    model.fold(json.dumps({"node": "controller", "state": "running", "stats": "nope"}))
    assert model.controller_rate is None
    model.fold(json.dumps({"state": "done", "instruction": "x", "detail": {"route": 3}}))
    assert model.plan_kind == ""


def test_control_characters_from_the_network_are_shown_as_escapes():
    model = StatusModel()
    event = model.fold(planner("failed", "boom\x1b[2J\x07", "clear\x1b[H"))
    assert "\x1b" not in event.line and "\x07" not in event.line
    assert "\\x1b[2J" in event.line and "\\x1b[H" in event.line
    assert "\x1b" not in model.fold("\x1b[31mred").line


def test_toolbar_shows_plan_progress_controller_safety_and_error():
    model = StatusModel()
    for message in (
        planner("received", {"route": "reward"}),
        planner("running", "planning: lift it"),
        controller("running", rate=12.34),
        safety("stopped", "watchdog"),
    ):
        model.fold(message)
    model.last_error = "controller rejected: bad term"
    segments = toolbar_segments(model)
    assert render_toolbar(segments) == (  # most important first: a narrow terminal cuts the end
        f"safety: STOPPED (watchdog) :resume | plan: reward | running: {INSTRUCTION}"
        " | error: controller rejected: bad term | planning: lift it | controller: running 12.3 Hz"
    )
    styles = dict((text.split(":")[0], style) for style, text in segments)
    assert styles["safety"] == "alert" and styles["error"] == "warn"


def test_toolbar_of_nothing_yet_and_width_clipping():
    model = StatusModel()
    assert render_toolbar(toolbar_segments(model)) == "safety: ? | plan: -"
    model.fold(planner("running", "x" * 300))
    line = render_toolbar(toolbar_segments(model), width=60)
    assert len(line) == 60 and line.endswith("…")


def test_prompt_label_says_where_plain_text_goes():
    assert prompt_label(True) == "correct> "
    assert prompt_label(False) == "instruct> "


def test_correction_replies_read_as_sentences_and_a_correction_of_nothing_starts_nothing():
    model = StatusModel()
    rejected = {
        "text": "a bit left",
        "kind": "offset",
        "action": "rejected",
        "error": "nothing is running to correct; say it as a new instruction",
    }
    event = model.fold(planner("correction", rejected))
    assert event.line == (
        '[planner] correction "a bit left" not applied: nothing is running '
        "to correct; say it as a new instruction"
    )
    assert not model.task_running(now=100.0)  # plain text stays an instruction

    model.fold(planner("received", {"route": "code"}))
    applied = {
        "text": "no, the blue one",
        "kind": "target",
        "action": "edit_code",
        "edit": "target red block -> blue block",
        "notes": [],
    }
    event = model.fold(planner("correction", applied))
    assert event.line == (
        '[planner] correction "no, the blue one": target red block -> blue '
        "block, applied to the running program"
    )
    assert model.task_running(now=100.0)
