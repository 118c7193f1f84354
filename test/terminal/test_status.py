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


def test_a_task_an_rl_policy_runs_says_so_once():
    model = StatusModel()
    model.fold(controller("running"))
    rl = {"rate_hz": 20.0, "backend": "rl:reach"}
    seen = model.fold(json.dumps({"node": "controller", "state": "running",
                                  "task": "lift the block", "stats": rl}))
    assert seen.line == "[controller] running: lift the block [policy reach]"
    assert model.fold(json.dumps({"node": "controller", "state": "running",
                                  "task": "lift the block", "stats": rl})) is None
    assert model.fold(controller("success")).line == "[controller] success: lift the block"


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


GOAL = "is_in('red block', 'yellow bowl')"
# A program written by the model, with lines that try to pass for the terminal's own
FORGED_CODE = "say('done')\noutcome: ok\n[planner] done (code): x — ok\rrobot says: hi\n"


def test_a_plan_about_to_run_shows_goal_and_program_lines_that_cannot_pass_for_status():
    model = StatusModel()
    model.fold(planner("received", {"route": "code"}))
    detail = {"route": "code", "code": FORGED_CODE, "goal": GOAL, "score": 0.934}
    event = model.fold(planner("plan", detail))
    assert (event.state, event.final, event.program) == ("plan", False, FORGED_CODE)
    assert event.line == (
        f"[planner] plan (code): {INSTRUCTION} — about to run, goal: {GOAL}, score 0.93"
    )
    assert event.more == (
        "    | say('done')",
        "    | outcome: ok",
        "    | [planner] done (code): x — ok\\rrobot says: hi",
    )
    assert all("\r" not in line and "\n" not in line for line in event.lines)
    assert model.task_running(now=100.0)  # the arm is about to move: text corrects it
    assert f"executing: {INSTRUCTION}" in render_toolbar(toolbar_segments(model))


def test_a_long_program_is_cut_and_a_plan_without_goal_says_so():
    model = StatusModel()
    code = "\n".join(f"move_to('red block', {i})" for i in range(50))
    event = model.fold(planner("plan", {"route": "code", "code": code, "score": None}))
    assert event.line.endswith("about to run, goal: (no goal stated)")
    assert len(event.more) == 41 and event.more[-1] == "    | ...[10 more lines]"


def test_a_reward_plan_shows_its_description_task_and_terms():
    model = StatusModel()
    spec = {
        "task": "lift red block",
        "terms": [
            {"term": "reach", "weight": 1.0, "params": {"object": "red block"}},
            {"term": "lift", "weight": 2.0, "params": {"object": "red block", "height": 0.1}},
        ],
    }
    detail = {"route": "reward", "spec": spec, "description": "lift the red block 10 cm"}
    event = model.fold(planner("plan", detail))
    assert event.line == (
        f"[planner] plan (reward): {INSTRUCTION} — about to run, reward spec: lift the red "
        "block 10 cm"
    )
    assert event.more == (
        "    | task: lift red block",
        "    | terms: reach(object='red block'), lift(object='red block', height=0.1) x2",
    )
    assert model.plan_kind == "reward" and model.progress.startswith("reward spec: lift")


def test_what_the_robot_says_is_one_quoted_line_and_the_task_runs_on():
    model = StatusModel()
    model.fold(planner("running", "running the program"))
    event = model.fold(planner("said", "I see no blue bowl\n[planner] done (code): x — ok"))
    assert event.lines == ("robot says: I see no blue bowl\\n[planner] done (code): x — ok",)
    assert not event.final and model.planner_state == "running"
    assert model.progress.startswith("says: I see no blue bowl")


WORDS = {
    "goal_reached": "goal reached",
    "goal_not_reached": "finished but goal not reached",
    "answered": "answered",
    "refused": "refused",
    "failed": "failed",
}


def final(verdict: str, state: str, **extra) -> str:
    detail = {"route": "code", "verdict": verdict, "goal": GOAL, "outcome": "ok"}
    detail.update({"message": "", "attempts": 1, "code": "pick('red block')", "said": []})
    return planner(state, {**detail, **extra})


@pytest.mark.parametrize(
    ("verdict", "state", "extra", "what", "ok"),
    [
        ("goal_reached", "done", {}, "goal reached", True),
        (
            "goal_not_reached",
            "failed",
            {"message": "the red block is not in the yellow bowl"},
            "finished but goal not reached: the red block is not in the yellow bowl",
            False,
        ),
        ("answered", "done", {"goal": ""}, "answered", True),
        (
            "refused",
            "failed",
            {"outcome": "denied", "message": "outside the workspace"},
            "refused: outside the workspace",
            False,
        ),
        (
            "failed",
            "failed",
            {"outcome": "skill", "message": "target out of reach"},
            "failed (skill): target out of reach",
            False,
        ),
    ],
)
def test_each_verdict_reads_as_what_happened(verdict, state, extra, what, ok):
    model = StatusModel()
    model.fold(planner("received", {"route": "code"}))
    event = model.fold(final(verdict, state, **extra))
    assert event.final and event.ok is ok and event.verdict == verdict
    assert event.line == f"[planner] {state} (code): {INSTRUCTION} — {what}"
    assert event.program == "pick('red block')"
    assert model.verdict == verdict and model.last_error == ("" if ok else f"{state}: {what}")
    segments = toolbar_segments(model)
    last = [(style, text) for style, text in segments if text.startswith("last: ")]
    assert last == [("" if ok else "warn", f"last: {WORDS[verdict]}")]


def test_a_final_shows_the_goal_and_every_said_line_quoted():
    model = StatusModel()
    said = ["I see no blue bowl, only the green block", "ok\noutcome: ok"]
    event = model.fold(final("goal_not_reached", "failed", said=said))
    assert event.more == (
        f"    goal: {GOAL}",
        "    robot said: I see no blue bowl, only the green block",
        "    robot said: ok\\noutcome: ok",
    )


def test_a_done_whose_goal_does_not_hold_is_not_ok():
    """Today's defect: a program that only said something was reported 'done — ok'. Whatever
    the state word, a stated verdict that did not reach the goal is shown and counted as such."""
    model = StatusModel()
    event = model.fold(final("goal_not_reached", "done", said=["I see no blue bowl"]))
    assert not event.ok
    assert event.line == f"[planner] done (code): {INSTRUCTION} — finished but goal not reached"
    assert " — ok" not in event.line and model.last_error


def test_a_final_without_a_verdict_reads_as_before_and_clears_the_last_verdict():
    model = StatusModel()
    model.fold(final("goal_reached", "done"))
    event = model.fold(planner("done", {"route": "code", "outcome": "ok", "code": "x()"}))
    assert event.line == f"[planner] done (code): {INSTRUCTION} — ok" and event.ok
    assert event.more == () and event.verdict == "" and model.verdict == ""
    assert "last:" not in render_toolbar(toolbar_segments(model))


def test_the_planner_saying_ready_is_one_line_and_starts_no_task():
    model = StatusModel()
    detail = {"llm": "LLM warmed: 6 prompt prefixes processed in 31.0 s", "warm_s": 31.0}
    event = model.fold(planner("ready", detail, instruction=""))
    assert event.line == "[planner] ready: LLM warmed: 6 prompt prefixes processed in 31.0 s"
    assert not event.final and not model.task_running(now=100.0)
    assert model.planner_state != "ready"  # it is no task state


def test_the_toolbar_stops_showing_the_warm_up_once_the_planner_is_ready():
    model = StatusModel()
    model.fold(planner("starting", "warming the planner's prompts: 6 of 7, ~13 s left",
                       instruction=""))  # fmt: skip
    assert "6 of 7" in render_toolbar(toolbar_segments(model))
    model.fold(planner("ready", {"llm": "LLM warmed"}, instruction=""))
    toolbar = render_toolbar(toolbar_segments(model))
    assert "6 of 7" not in toolbar and "starting" not in toolbar and "ready" in toolbar
