"""Skill plans without ROS (issue 18): the conductor routes what the VLA can do to the skill
route, which gates it, publishes the contract's JSON start, follows the VLA node's status lines
by plan id, gives up and cancels when none ends it, forwards corrections as language motions,
remembers the applied ones and starts later similar plans with them.

The conductor, its sandbox runner, the privilege policy, the correction router and memory are
the real ones on a simulated arm; test doubles stand in for the LLM planner (no code plan runs
here) and for the two hosts: ``RecordingOutlet`` (what the planner node would publish) and
``FakeVLA``, the VLA node's side of the skill topic, answering in its status format."""

from __future__ import annotations

import json
import threading
import time

import pytest
from support.conductor import (
    FakeVLA,
    make_skill,
    poll_until,
    sim_code,
)

from lang2policy.conductor import Conductor
from lang2policy.conductor.skill_route import SkillRoute, SkillScene, SkillSettings
from lang2policy.corrections import CorrectionMemory
from lang2policy.errors import ConfigError
from lang2policy.planning.correcting import CorrectionRouter
from lang2policy.sandbox.policy import default_policy, workspace_box
from lang2policy.sandbox.runner import SandboxLimits
from lang2policy.skills.catalog import SKILLS

LIMITS = SandboxLimits(wall_seconds=30, cpu_seconds=10, memory_mb=512)


def test_routing_with_and_without_the_vla():
    conductor, _ = make_skill(FakeVLA())
    assert conductor._choose("lift the red block") == "skill"
    assert conductor._choose("Put the red block in the blue bowl.") == "skill"
    assert conductor._choose("stack all the blocks") == "code"  # not in the VLA's vocabulary
    assert conductor._choose("lift the red block 10 cm") == "reward"
    plain, _ = make_skill(FakeVLA())
    plain.skills = None  # the graph without the VLA: routing as before
    assert plain._choose("lift the red block") == "reward"
    assert plain._choose("put the red block in the blue bowl") == "code"


def test_route_skill_refuses_what_the_vla_cannot_do_with_what_it_can():
    vla = FakeVLA()
    conductor, outlet = make_skill(vla, route="skill")
    assert conductor.handle("stack all the blocks") is None
    refused = outlet.last("rejected").detail
    assert "route skill: the VLA cannot check 'stack all the blocks'" in refused
    assert "lift the red block" in refused or "put the red block in the blue bowl" in refused
    assert vla.sent == []
    with pytest.raises(ConfigError, match="needs a skill policy"):
        Conductor(outlet, conductor.code, conductor.planning, conductor.reward,
                  CorrectionRouter(None), "skill")  # fmt: skip


def test_a_skill_plan_publishes_its_start_with_the_gates_limits_and_ends_on_the_vla():
    vla = FakeVLA()
    conductor, outlet = make_skill(vla)
    result = conductor.handle("put the red block in the blue bowl")
    assert result.ok and result.route == "skill"
    start = vla.started()
    box = workspace_box(conductor.code.backend.description)
    assert start["skill"] == "put the red block in the blue bowl"
    assert start["limits"] == {
        "time_budget_s": 30.0,  # the pick-and-place family's budget
        "max_joint_speed": 1.0,
        "workspace": {"min": [round(v, 4) for v in box.min], "max": [round(v, 4) for v in box.max]},
    }
    assert "motions" not in start  # nothing remembered
    detail = result.detail
    assert detail["plan_id"] == start["plan_id"] and len(start["plan_id"]) == 12
    assert (detail["outcome"], detail["rule"]) == ("success", "vla-skill")
    assert detail["stats"] == {"steps": 12}
    lines = [e.detail for e in outlet.events if e.state == "running"]
    assert any("allowed by rule 'vla-skill'" in line for line in lines)
    assert not any(line.startswith("VLA") for line in lines)  # the VLA's own line, not twice
    assert (detail["verdict"], outlet.events[-1].detail["verdict"]) == ("goal_reached",) * 2
    assert outlet.states()[-1] == "done"


def test_other_plans_lines_are_ignored_and_a_failure_fails_the_plan():
    vla = FakeVLA(final=None)
    conductor, outlet = make_skill(vla)
    conductor.instruct("lift the red block")
    poll_until(lambda: vla.plan_id, "the start")
    vla.say("success", "someone else's skill", plan_id="another-plan")
    time.sleep(0.2)
    assert conductor.busy
    vla.say("timeout", "the time budget of 20 s is spent")
    final = outlet.wait("failed", 10.0).detail
    assert (final["outcome"], final["message"]) == ("timeout", "the time budget of 20 s is spent")


def test_denied_plans_publish_nothing_and_fail_with_the_rules_reason():
    vla = FakeVLA()
    conductor, _ = make_skill(vla, settings=SkillSettings(max_joint_speed=3.0))
    result = conductor.handle("lift the red block")
    assert not result.ok and result.detail["outcome"] == "denied"
    assert "denied by the privilege policy" in result.detail["message"]
    assert "max_joint_speed=3 fails" in result.detail["message"]
    assert vla.sent == []
    conductor.skills.settings = SkillSettings()
    conductor.update_objects({"red block": (0.9, 0.0, 0.02)}, {})  # out of reach
    far = conductor.handle("lift the red block")
    assert "outside zone 'workspace'" in far.detail["message"] and vla.sent == []


def test_no_vla_node_and_no_answer_fail_clearly_and_cancel():
    nobody = FakeVLA(listeners=0)
    conductor, _ = make_skill(nobody)
    result = conductor.handle("lift the red block")
    assert result.detail["outcome"] == "no_vla" and "vla:=true" in result.detail["message"]
    assert nobody.sent == []
    silent = FakeVLA(final=None)
    quick = SkillSettings(time_budget_s=0.3, answer_margin_s=0.2)
    conductor, _ = make_skill(silent, settings=quick)
    began = time.monotonic()
    result = conductor.handle("lift the red block")
    waited = time.monotonic() - began
    assert 0.45 < waited < 3.0, waited
    assert result.detail["outcome"] == "no_answer"
    assert "did not end skill plan" in result.detail["message"]
    assert silent.sent[-1] == ""  # cancelled


def test_a_rejected_start_without_a_plan_id_ends_the_plan():
    vla = FakeVLA(final=None)
    conductor, _ = make_skill(vla)
    vla.send_skill = lambda text: (vla.sent.append(text), reject(vla, text))  # an older node
    result = conductor.handle("lift the red block")
    assert result.detail["outcome"] == "rejected"
    assert "cannot check" in result.detail["message"]


def reject(vla: FakeVLA, text: str) -> None:
    line = {"node": "vla", "state": "rejected", "instruction": text[:200],
            "detail": "the VLA cannot check '{...}'"}  # fmt: skip
    vla.route.on_status(line)


def test_stop_during_a_skill_plan_cancels_it_and_holds():
    vla = FakeVLA(final=None)
    conductor, outlet = make_skill(vla)
    conductor.instruct("lift the red block")
    poll_until(lambda: vla.plan_id, "the start")
    conductor.corrections.correct("stop")
    conductor.wait_idle(10)
    assert outlet.states("lift the red block")[-1] == "stopped"  # the plan's end: the stop
    final = outlet.last("stopped").detail
    assert outlet.last("correction").detail["action"] == "stop"
    assert conductor.outlet.stop_requests == 1 and vla.sent[-1] == ""
    assert final["outcome"] == "cancelled"
    assert outlet.states("") == ["stopped"]  # the stop itself, once


def test_corrections_are_forwarded_as_language_motions_and_remembered(tmp_path):
    memory = CorrectionMemory(tmp_path / "corrections.jsonl")
    vla = FakeVLA(final=None)
    conductor, outlet = make_skill(vla, memory=memory)
    conductor.instruct("put the red block in the blue bowl")
    poll_until(lambda: vla.plan_id, "the start")
    plan_id = vla.plan_id
    conductor.corrections.correct("a bit to the left")
    poll_until(lambda: len(outlet.states()) and outlet.states().count("correction") == 2, "answer")
    forwarded, applied = [e.detail for e in outlet.events if e.state == "correction"]
    assert json.loads(vla.sent[-1]) == {"motion": "a bit to the left", "plan_id": plan_id}
    assert (forwarded["action"], forwarded["kind"]) == ("forwarded", "offset")
    assert applied["action"] == "applied" and applied["notes"] == ["offset now [0, 0.02, 0]"]
    vla.say("success", "done")
    outlet.wait("done", 10.0)
    assert [r.text for r in memory.records()] == ["a bit to the left"]
    assert memory.records()[0].situation["plan"] == "skill"

    again = FakeVLA()  # a later, similar skill plan starts with the correction
    conductor.skills.port, again.route = again, conductor.skills
    result = conductor.handle("Put the red block in the blue bowl.")
    assert again.started()["motions"] == ["a bit to the left"]
    assert result.detail["motions"] == ["a bit to the left"]
    assert "a bit to the left" in outlet.last("remembered").detail[0]


def test_a_correction_with_no_skill_running_is_refused_by_the_route():
    route = SkillRoute(FakeVLA(), default_policy(sim_code().backend.description, SKILLS))
    assert route.motion("a bit to the left", lambda answer: None) == "no skill plan is running"
    route.cancel()  # nothing runs: nothing published
    assert route.port.sent == []
    scene = SkillScene({}, ["red block"])
    answer = route.run("dance", scene, lambda line: None)
    assert answer.detail["outcome"] == "rejected" and "The VLA can do" in answer.detail["message"]


def test_settings_are_checked():
    with pytest.raises(ConfigError, match="max_joint_speed must be a finite number > 0"):
        SkillSettings(max_joint_speed=0.0)
    with pytest.raises(ConfigError, match="time_budget_s must be a finite number >= 0"):
        SkillSettings(time_budget_s=float("nan"))


def test_cancel_from_another_thread_ends_the_wait_soon():
    vla = FakeVLA(final=None)
    conductor, _ = make_skill(vla)
    done = threading.Event()
    threading.Thread(target=lambda: (conductor.handle("lift the red block"), done.set())).start()
    poll_until(lambda: vla.plan_id, "the start")
    began = time.monotonic()
    conductor.skills.cancel()
    assert done.wait(5.0) and time.monotonic() - began < 1.0


def test_the_terminal_says_what_became_of_a_correction_of_a_skill():
    from lang2policy.graph.topics import StatusEvent
    from lang2policy.terminal.status import StatusModel

    said = []
    for action in ("forwarded", "applied"):
        detail = {"text": "a bit to the left", "kind": "offset", "edit": "2 cm left",
                  "action": action}  # fmt: skip
        line = StatusEvent("planner", "correction", "lift the red block", detail).to_dict()
        said += StatusModel().fold(json.dumps(line)).lines
    assert any("sent to the VLA as a language motion" in text for text in said), said
    assert any("applied by the VLA" in text for text in said), said


class StopRacingVLA(FakeVLA):
    """A stop lands while the route sends its start: the stop's cancel ("") goes out on the
    skill topic just before the start does (two threads publishing on one topic)."""

    raced = False

    def send_skill(self, text: str) -> None:
        if text.startswith('{"skill"') and not self.raced:
            self.raced = True
            self.route.cancel()
        super().send_skill(text)


def test_a_stop_racing_the_start_still_cancels_the_skill_on_the_vla():
    vla = StopRacingVLA(final=None)
    conductor, _ = make_skill(vla)
    result = conductor.handle("lift the red block")
    assert vla.sent[0] == "" and vla.sent[1].startswith('{"skill"')
    assert vla.sent[-1] == "", "the skill started after the cancel must be cancelled too"
    assert result.detail["outcome"] == "cancelled", result.detail


class StopWhileGatingVLA(FakeVLA):
    """A stop arrives after the skill plan began but before its start is sent."""

    conductor: Conductor | None = None

    def skill_listeners(self) -> int:
        self.conductor.stop("stopped by a stop request (/lang2policy/stop)")
        return super().skill_listeners()


def test_a_stop_before_the_start_is_sent_starts_no_skill():
    vla = StopWhileGatingVLA(final="success")
    conductor, _ = make_skill(vla)
    vla.conductor = conductor
    result = conductor.handle("lift the red block")
    assert not any(text.startswith('{"skill"') for text in vla.sent), vla.sent
    assert result.state == "stopped" and result.detail["outcome"] == "stopped", result.detail
