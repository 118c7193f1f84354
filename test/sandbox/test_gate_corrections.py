"""Every motion through the privilege gate: live corrections, recalled edits and host planning
(issue 13, findings 1 and 3), judged by where the arm went at every physics step.

A thread plays the robot node (``live_arm.LiveArm``): it steps a real simulated ``World`` one
physics step at a time, applies the commands the planner's ``RemoteSession`` streams, feeds
back the measured state and objects, and records the tool centre point after every step. The
planner side is the real ``SandboxRunner`` (sandbox child, privilege policy) on a
``RemoteSkillBackend``; corrections go through the real ``CorrectionRouter`` and ``ArgEdits``.
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from lang2policy.bench.live_arm import OBJECTS, LiveArm
from lang2policy.corrections import CorrectionMemory, MemoryRecord, classify
from lang2policy.corrections.correction import CorrectionError
from lang2policy.paths import config_dir
from lang2policy.planning.correcting import ArgEdits, CorrectionRouter
from lang2policy.sandbox.policy import PrivilegePolicy, default_policy, workspace_box
from lang2policy.sandbox.runner import SandboxLimits, SandboxRunner
from lang2policy.skills.catalog import SKILLS
from lang2policy.skills.remote import RemoteSkillBackend

LIMITS = SandboxLimits(wall_seconds=20, cpu_seconds=10, memory_mb=512)


def base_policy(arm: LiveArm) -> PrivilegePolicy:
    """config/policies/default.yaml: the SO-101's workspace box ends at x = 0.35 m; 0.25 m/s."""
    return default_policy(arm.world.description, known_skills=SKILLS)


def keep_out_policy(arm: LiveArm) -> PrivilegePolicy:
    base = default_policy(arm.world.description, known_skills=SKILLS)
    path = config_dir() / "policies" / "examples" / "keep_out.yaml"
    plan = PrivilegePolicy.load(path, workspace_box(arm.world.description), SKILLS)
    return base.narrowed(plan)


class Planner:
    """The planner side: runner + router + edits, as the planner node wires them."""

    def __init__(self, arm: LiveArm, policy: PrivilegePolicy, memory=None) -> None:
        self.arm = arm
        self.backend = RemoteSkillBackend(arm.session)
        self.runner = SandboxRunner(self.backend, policy, limits=LIMITS)
        self.router = CorrectionRouter(memory)
        self.refused: list[tuple[str, str]] = []
        self.accepted: list[str] = []

    def start_plan(self, instruction: str) -> ArgEdits:
        def accepted(edit, note):
            self.accepted.append(edit.correction.describe())
            self.router.remember_accepted(edit, note)

        edits = ArgEdits(
            lambda: (self.arm.world.object_names(), {}),
            on_accepted=accepted,
            on_refused=lambda edit, reason: self.refused.append((edit.correction.text, reason)),
        )
        self.router.recall_into_edits(instruction, edits)
        self.runner.edits = edits
        return edits

    def correct_during_motion(self, text: str, instruction: str, edits: ArgEdits, after=0.4):
        """Say ``text`` once a motion has run ``after`` s of sim time (in a thread)."""

        def correct():
            deadline = time.monotonic() + 30  # never outlive the test polling
            while self.backend.current_call is None and time.monotonic() < deadline:
                time.sleep(0.002)
            started = self.arm.world.time
            while self.arm.world.time < started + after and time.monotonic() < deadline:
                time.sleep(0.002)
            call = self.backend.current_call
            assert call is not None, "the motion ended before the correction was said"
            routed = self.router.route(
                text, OBJECTS, instruction=instruction, code_call=call, edits=edits
            )
            self.routed = routed
            if routed.action == "edit_code":
                self.backend.interrupt_for_edit()

        thread = threading.Thread(target=correct, daemon=True)
        thread.start()
        return thread


# ----------------------------------------------------------------- finding 1: live edits
def test_an_offset_edit_the_policy_denies_is_refused_and_the_arm_stays_inside(arm):
    planner = Planner(arm, base_policy(arm))
    edits = planner.start_plan("move forward")
    t0 = arm.world.time
    thread = planner.correct_during_motion("10 cm further", "move forward", edits)
    outcome = planner.runner.run("move_to([0.30, 0.0, 0.10], speed=0.08)")
    thread.join(5)
    assert outcome.ok, outcome.summary()
    assert planner.routed.action == "edit_code"
    assert planner.refused and "workspace" in planner.refused[0][1]
    assert planner.runner.restarts == 1  # re-decided from where the arm was, then went on
    assert arm.since(t0)[:, 0].max() <= 0.35 + 0.003  # measured every physics step
    assert abs(arm.tool()[0] - 0.30) < 0.01  # the last safe behaviour: the asked target


def test_an_allowed_offset_edit_restarts_the_call_with_the_edit(arm):
    planner = Planner(arm, base_policy(arm))
    edits = planner.start_plan("move forward")
    thread = planner.correct_during_motion("3 cm further", "move forward", edits)
    outcome = planner.runner.run("move_to([0.26, 0.0, 0.10])")
    thread.join(5)
    assert outcome.ok, outcome.summary()
    assert not planner.refused and planner.accepted == ["offset 3.0 cm forward"]
    assert abs(arm.tool()[0] - 0.29) < 0.01
    assert outcome.intents[-1].args["position"][0] == pytest.approx(0.29)


def test_an_offset_into_a_keep_out_zone_is_refused_without_ending_the_plan(arm):
    planner = Planner(arm, keep_out_policy(arm))
    edits = planner.start_plan("go right")
    t0 = arm.world.time
    thread = planner.correct_during_motion("15 cm to the left", "go right", edits)
    outcome = planner.runner.run("move_to([0.26, -0.02, 0.10], speed=0.05)")
    thread.join(5)
    assert outcome.ok, outcome.summary()
    assert planner.refused and "person" in planner.refused[0][1]
    assert arm.since(t0)[:, 1].max() < 0.10  # never into the person's side


@pytest.mark.parametrize(("policy", "cap"), [("default", 0.25), ("keep_out", 0.10)])
def test_a_speed_edit_is_capped_by_the_policy_on_this_and_every_later_call(arm, policy, cap):
    chosen = keep_out_policy(arm) if policy == "keep_out" else base_policy(arm)
    planner = Planner(arm, chosen)
    edits = planner.start_plan("go forward and back")
    t0 = arm.world.time
    thread = planner.correct_during_motion("at 50 cm/s", "go forward and back", edits, after=0.2)
    program = "move_to([0.25, -0.05, 0.12], speed=0.05)\nmove_to([0.16, 0.0, 0.10], speed=0.05)"
    outcome = planner.runner.run(program)
    thread.join(5)
    assert outcome.ok, outcome.summary()
    assert [i.args["speed"] for i in outcome.intents] == [pytest.approx(cap, abs=0.002)] * 2
    assert planner.accepted == [f"speed {cap:g} m/s"]
    assert arm.peak_speed(t0) <= cap * 1.2  # the tool, measured: never the catalog's 0.5 m/s


def test_a_remembered_speed_edit_is_decided_again_on_the_next_instruction(arm, tmp_path):
    memory = CorrectionMemory(tmp_path / "corrections.jsonl")
    correction = classify("at 50 cm/s", OBJECTS)
    memory.remember("move to the front", correction, {"plan": "code"})
    planner = Planner(arm, keep_out_policy(arm), memory)
    planner.start_plan("move to the front")
    t0 = arm.world.time
    outcome = planner.runner.run("move_to([0.25, -0.05, 0.12], speed=0.05)")
    assert outcome.ok, outcome.summary()
    assert outcome.intents[0].args["speed"] == pytest.approx(0.10, abs=0.002)
    assert arm.peak_speed(t0) <= 0.10 * 1.2


def test_offsets_add_up_to_a_bound():
    edits = ArgEdits(lambda: (OBJECTS, {}))
    edits.add(classify("10 cm to the left", OBJECTS))
    with pytest.raises(CorrectionError, match="at most 15 cm per axis"):
        edits.add(classify("10 cm more to the left", OBJECTS))
    router = CorrectionRouter(None)
    routed = router.route(
        "10 cm to the left",
        OBJECTS,
        instruction="x",
        code_call=("move_to", {"position": [0.2, 0.0, 0.1], "speed": 0.1}),
        edits=edits,
    )
    assert routed.action == "rejected" and "15 cm" in routed.error


def test_memory_records_are_validated_on_load(tmp_path):
    path = tmp_path / "corrections.jsonl"
    good = MemoryRecord("a1", 1.0, "move left", "a bit to the left", "offset",
                        {"offset": [0.0, 0.02, 0.0]}, {"plan": "code"})
    bad = [
        {**good.to_dict(), "id": "b1", "edit": {"offset": [0.0, 5.0, 0.0]}},  # a 5 m offset
        {**good.to_dict(), "id": "b2", "kind": "speed", "edit": {"speed": 50.0}},
        {**good.to_dict(), "id": "b3", "kind": "speed", "edit": {"factor": 1e9}},
        {**good.to_dict(), "id": "b4", "instruction": "x" * 10_000},
        {**good.to_dict(), "id": "b5", "time": "yesterday"},
    ]
    lines = [json.dumps(good.to_dict())] + [json.dumps(b) for b in bad] + ["[" * 100_000]
    path.write_text("\n".join(lines) + "\n")
    memory = CorrectionMemory(path)
    assert [r.id for r in memory.records()] == ["a1"]
    assert memory.skipped == len(bad) + 1


# ----------------------------------------------------------------- finding 3: host time
# Within the arm's reach but outside the workspace box (y >= -0.25): each call costs the host
# a full IK search (tilts, leaning) before the policy refuses it.
UNREACHABLE_LOOP = """
for i in range(199):
    try:
        move_to([0.2, -0.30 - (i % 10) * 0.01, 0.1])
    except Exception:
        pass
"""


def test_host_planning_of_refused_calls_counts_against_the_wall_budget(arm):
    limits = SandboxLimits(wall_seconds=3, cpu_seconds=10, memory_mb=512)
    backend = RemoteSkillBackend(arm.session)
    runner = SandboxRunner(backend, base_policy(arm), limits=limits)
    started = time.monotonic()
    outcome = runner.run(UNREACHABLE_LOOP)
    elapsed = time.monotonic() - started
    assert outcome.kind == "limit" and outcome.limit == "wall", outcome.summary()
    assert len(outcome.intents) < 199
    assert elapsed < 3 + 3.0  # the budget, one IK solve and the child's start


def test_a_stop_interrupts_host_planning(arm):
    backend = RemoteSkillBackend(arm.session)
    runner = SandboxRunner(backend, base_policy(arm), limits=LIMITS)
    stopped: dict[str, float] = {}
    reason = "stopped by the person"

    def stop_soon():
        deadline = time.monotonic() + 30
        while len(runner_intents) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        stopped["at"] = time.monotonic()
        backend.abort(reason)
        stopped["reason"] = reason

    runner_intents: list = []
    runner.on_intent = runner_intents.append
    runner.cancelled = lambda: stopped.get("reason", "")
    threading.Thread(target=stop_soon, daemon=True).start()
    outcome = runner.run(UNREACHABLE_LOOP)
    ended = time.monotonic()
    assert outcome.kind == "stopped" and reason in outcome.message, outcome.summary()
    assert ended - stopped["at"] < 0.5  # not the next command: within one IK start
    assert len(outcome.intents) <= 4
