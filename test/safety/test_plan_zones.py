"""A plan's keep-out zones reach the safety node: the ``/lang2policy/plan_zones`` codec, which
of a privilege policy's zones are keep-out, and the conductor sending them when a plan starts
and withdrawing them when it ends, for code, skill and reward plans.

The conductor, its sandbox runner, the privilege policies (config/policies/default.yaml,
narrowed by examples/keep_out.yaml) and the simulated arm are the real ones; ``ZoneLog`` stands
in for the planner node's side of the topic, ``FakeVLA`` (test_skill_route) for the VLA node.
"""

from __future__ import annotations

import json
import time

import pytest
from support.conductor import (
    FakeVLA,
    RecordingOutlet,
    ScriptedPlanner,
    ScriptedRewardPlanner,
    sim_code,
)

from lang2policy.conductor import Conductor, SpecHandOff
from lang2policy.conductor.reward_route import RewardRoute
from lang2policy.conductor.skill_route import SkillRoute
from lang2policy.config import read_yaml
from lang2policy.errors import ConfigError
from lang2policy.paths import config_dir
from lang2policy.planning.correcting import CorrectionRouter
from lang2policy.planning.loop import PlanLoop
from lang2policy.safety.config import BoxConfig
from lang2policy.safety.plan_zones import MAX_BYTES, decode_plan_zones, encode_plan_zones
from lang2policy.sandbox.policy import PrivilegePolicy, default_policy, workspace_box
from lang2policy.sandbox.policy_keep_out import keep_out_zones
from lang2policy.sandbox.policy_zones import Box
from lang2policy.sandbox.runner import SandboxLimits, SandboxRunner
from lang2policy.skills.catalog import SKILLS

LIMITS = SandboxLimits(wall_seconds=30, cpu_seconds=10, memory_mb=512)
KEEP_OUT = config_dir() / "policies" / "examples" / "keep_out.yaml"
PERSON_SIDE = Box((-1.0, 0.10, -0.1), (1.5, 1.5, 1.5))  # keep_out.yaml's zone
ZONE = {"min": [0.1, 0.2, 0.0], "max": [0.3, 0.4, 0.5]}


# ------------------------------------------------------------------ the codec
def test_zones_survive_the_wire_and_an_empty_mapping_means_no_plan():
    zones = {"person_side": PERSON_SIDE, "tray": BoxConfig((0.1, 0.2, 0.0), (0.3, 0.4, 0.5))}
    text = encode_plan_zones("3f2a9c01b7de", zones)
    assert json.loads(text) == {
        "plan_id": "3f2a9c01b7de",
        "keep_out": {
            "person_side": {"min": [-1.0, 0.1, -0.1], "max": [1.5, 1.5, 1.5]},
            "tray": ZONE,
        },
    }
    plan_id, decoded = decode_plan_zones(text)
    assert plan_id == "3f2a9c01b7de"
    assert decoded == {
        "person_side": BoxConfig((-1.0, 0.1, -0.1), (1.5, 1.5, 1.5)),
        "tray": BoxConfig((0.1, 0.2, 0.0), (0.3, 0.4, 0.5)),
    }
    assert decode_plan_zones(encode_plan_zones(None, {})) == (None, {})
    assert decode_plan_zones(b'{"plan_id": null, "keep_out": {}}') == (None, {})


def message(**changes) -> str:
    fields = {"plan_id": "p1", "keep_out": {"tray": ZONE}} | changes
    return json.dumps(fields)


many = {f"z{i}": ZONE for i in range(33)}
padded = {"plan_id": "p1", "keep_out": {}, "pad": "x" * MAX_BYTES}


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (json.dumps(padded), "at most 65536"),  # size first: before any parsing
        ("[1, 2]", "expected a JSON object"),
        ("{not json", "plan zones"),
        (json.dumps({"plan_id": "p1"}), "keys must be exactly ['plan_id', 'keep_out']"),
        (message(extra=1), "keys must be exactly"),
        (message(plan_id=7), "plan_id (null when no plan runs) must be 1 to 64 printable"),
        (message(plan_id=""), "plan_id (null when no plan runs) must be 1 to 64"),
        (message(keep_out=[ZONE]), "keep_out must be an object, got list"),
        (message(keep_out=many), "keep_out has 33 zones; at most 32"),
        (message(keep_out={"x" * 65: ZONE}), "zone name must be 1 to 64 printable"),
        (message(keep_out={"a\nb": ZONE}), "zone name must be 1 to 64 printable"),
        (message(keep_out={"": ZONE}), "zone name must be 1 to 64 printable"),
        (message(keep_out={"tray": {"min": [0, 0, 0]}}), "keep_out.tray: must be {min"),
        (message(keep_out={"tray": [0, 0, 0]}), "keep_out.tray: must be {min"),
        (message(keep_out={"tray": {**ZONE, "min": [0, 0]}}), "keep_out.tray.min: must be 3"),
        (message(keep_out={"tray": {**ZONE, "max": [1, 1, 1, 1]}}), "tray.max: must be 3"),
        (message(keep_out={"tray": {**ZONE, "min": [0, True, 0]}}), "tray.min: must be 3 finite"),
        (message(keep_out={"tray": {**ZONE, "min": [0, "0", 0]}}), "tray.min: must be 3 finite"),
        (message().replace("0.1", "NaN"), "NaN"),
        (message().replace("0.5", "1e999"), "finite"),
        (message(keep_out={"tray": {**ZONE, "min": [0.1, 0.4, 0]}}), "min y (0.4) must be below"),
        (message(keep_out={"tray": {"min": ZONE["max"], "max": ZONE["min"]}}), "min x (0.3)"),
        ('{"plan_id": "p1", "keep_out": {"t": {"min": [[[[0]]]], "max": [1, 1, 1]}}}', "deep"),
    ],
)
def test_bad_messages_are_refused_naming_the_field_and_the_limit(text, says):
    with pytest.raises(ConfigError) as refused:
        decode_plan_zones(text)
    assert says in str(refused.value)


def test_zones_that_break_a_limit_are_not_sent():
    with pytest.raises(ConfigError, match="at most 32"):
        encode_plan_zones("p1", {f"z{i}": PERSON_SIDE for i in range(33)})
    with pytest.raises(ConfigError, match="printable"):
        encode_plan_zones("p1", {"bad\tname": PERSON_SIDE})


# ------------------------------------------------------------------ which zones are keep-out
def base_policy() -> PrivilegePolicy:
    return default_policy(sim_code().backend.description, known_skills=SKILLS)


def plan_policy(*rules: dict, vla: bool = False) -> PrivilegePolicy:
    """examples/keep_out.yaml with ``rules`` added (and an allow rule for VLA skills)."""
    data = read_yaml(KEEP_OUT)
    data["zones"]["tray"] = ZONE
    data["rules"] += list(rules)
    if vla:  # as narrow as the default's rule `vla-skill`, or narrowing refuses it
        base = read_yaml(config_dir() / "policies" / "default.yaml")["rules"]
        data["rules"].append(next(r for r in base if r["id"] == "vla-skill"))
    box = workspace_box(sim_code().backend.description)
    return PrivilegePolicy.from_dict(data, box, "plan.yaml", SKILLS)


def test_forbidden_zones_are_keep_out_and_containment_zones_are_not():
    base = base_policy()
    assert keep_out_zones(base) == {}  # `workspace`: targets must be IN it (containment)
    narrowed = base.narrowed(plan_policy())
    assert keep_out_zones(narrowed) == {"person_side": PERSON_SIDE}  # forbid, any target in it


@pytest.mark.parametrize(
    ("rule", "keep_out"),
    [
        ({"skill": "push"}, True),  # some tool motions: the safety node cannot tell which
        ({"skill": "vla_skill"}, True),
        ({"skill": "*"}, True),
        ({"skill": ["open_gripper", "close_gripper"]}, False),  # in place: never in a zone
        ({"category": "query"}, False),
        ({"category": "motion", "effect": "allow"}, False),
        ({"category": "motion", "args": {"speed": {"type": "number", "minimum": 0.05}}}, False),
    ],
)
def test_a_zone_is_keep_out_when_a_forbid_rule_keeps_tool_motions_out_whatever_the_call(
    rule, keep_out
):
    when = {"targets_any_in": "tray"}
    if "args" in rule:
        when["args"] = rule.pop("args")
    full = {"id": "tray-rule", "effect": "forbid", "priority": 20, **rule, "when": when}
    zones = keep_out_zones(plan_policy(full))
    assert ("tray" in zones) is keep_out
    assert "person_side" in zones  # keep_out.yaml's own rule
    if keep_out:
        assert zones["tray"] == Box(tuple(ZONE["min"]), tuple(ZONE["max"]))


# ------------------------------------------------------------------ the conductor sends them
class ZoneLog:
    """The planner node's side of /lang2policy/plan_zones, recorded in one timeline with the
    status events and the skill topic's messages: ("zones", plan_id, names), ("status", state),
    ("skill", text)."""

    def __init__(self, outlet: RecordingOutlet) -> None:
        self.timeline: list[tuple] = []
        self.sent: list[tuple[str | None, dict]] = []
        status = outlet.status
        outlet.status = lambda event: (self.timeline.append(("status", event.state)), status(event))

    def send_plan_zones(self, plan_id, zones) -> None:
        encode_plan_zones(plan_id, zones)  # what the node publishes must be valid
        self.sent.append((plan_id, dict(zones)))
        self.timeline.append(("zones", plan_id, sorted(zones)))

    def before(self, a: tuple, b_kind: str) -> bool:
        """True when entry ``a`` comes before the first entry of kind ``b_kind``."""
        first = next(i for i, e in enumerate(self.timeline) if e[0] == b_kind)
        return self.timeline.index(a) < first


def make(policy: PrivilegePolicy, programs=None, vla: FakeVLA | None = None):
    outlet, code = RecordingOutlet(), sim_code()
    outlet.handoff = SpecHandOff(outlet)  # its stand-in controller ends each spec: success
    log = ZoneLog(outlet)
    runner = SandboxRunner(code.backend, policy, limits=LIMITS)
    skills = None
    if vla is not None:
        skills = SkillRoute(vla, policy)
        vla.route = skills
        send = vla.send_skill
        vla.send_skill = lambda text: (log.timeline.append(("skill", text)), send(text))
    conductor = Conductor(
        outlet,
        code,
        PlanLoop(ScriptedPlanner(programs or {}), runner, code.backend),
        RewardRoute(outlet.handoff, ScriptedRewardPlanner),
        CorrectionRouter(None),
        "auto",
        skills,
        zones=log,
    )
    world = code.session.world
    positions = {n: tuple(world.object_pose(n).position) for n in world.object_names()}
    conductor.update_objects(positions, {n: 0.0 for n in positions})
    return conductor, log


def test_a_skill_plan_next_to_a_zone_starts_only_after_its_zones_went_out():
    """The issue's case: a VLA skill on a block 3 cm outside the plan's keep-out zone is
    allowed by the gate; the zone now goes to the safety node before the skill starts."""
    vla = FakeVLA()
    policy = base_policy().narrowed(plan_policy(vla=True))
    conductor, log = make(policy, vla=vla)
    positions = dict(conductor.positions)
    positions["red block"] = (0.22, 0.07, 0.0125)  # 3 cm from person_side (y > 0.10)
    conductor.update_objects(positions, {})
    result = conductor.handle("lift the red block")
    assert result.ok and result.route == "skill", result.detail
    (plan_id, zones), withdrawn = log.sent
    assert zones == {"person_side": PERSON_SIDE} and len(plan_id) == 12
    assert withdrawn == (None, {})
    start = ("zones", plan_id, ["person_side"])
    assert log.before(start, "skill")  # the zones go out before the VLA gets the skill
    assert log.timeline.index(("zones", None, [])) < log.timeline.index(("status", "done"))


def test_a_code_plan_sends_its_zones_first_and_withdraws_them_at_its_end():
    go = "go to the front"
    programs = {go: "move_to([0.22, -0.05, 0.12], speed=0.1)"}
    conductor, log = make(base_policy().narrowed(plan_policy()), programs)
    result = conductor.handle(go)
    assert result.ok, result.detail
    assert [zones for _, zones in log.sent] == [{"person_side": PERSON_SIDE}, {}]
    assert log.timeline[1] == ("zones", log.sent[0][0], ["person_side"])  # right after received
    assert log.timeline[-2:] == [("zones", None, []), ("status", "done")]
    conductor.planning.handle = lambda *args, **kwargs: 1 / 0  # a plan that breaks
    failed = conductor.handle(go)
    assert failed.state == "failed" and "ZeroDivisionError" in failed.detail
    assert log.sent[-1] == (None, {}) and not conductor.busy
    assert log.sent[-2][0] != log.sent[0][0]  # each plan has its own id


def test_a_reward_task_keeps_its_zones_until_the_stop():
    conductor, log = make(base_policy().narrowed(plan_policy()))
    result = conductor.handle("lift the red block 10 cm")
    assert result.route == "reward" and result.ok
    assert log.sent == [(log.sent[0][0], {"person_side": PERSON_SIDE})]  # the MPC runs on
    conductor.stop("stop said")
    assert log.sent[-1] == (None, {}) and len(log.sent) == 2
    conductor.stop("stop said again")
    assert len(log.sent) == 2  # nothing more to withdraw


def test_the_default_policy_sends_no_zones_and_a_conductor_without_a_port_runs_as_before():
    question = "what is on the table?"
    conductor, log = make(base_policy(), {question: 'say("a red block")'})
    assert conductor.handle(question).ok
    assert [zones for _, zones in log.sent] == [{}, {}]
    conductor.zones.port = None
    assert conductor.handle(question).ok and len(log.sent) == 2


# ------------------------------------------------------------------ the planner node's topic
@pytest.mark.ros
def test_the_planner_nodes_zones_are_latched_for_a_safety_node_that_joins_late():
    """What ``PlannerNode.send_plan_zones`` publishes with ``qos.LATCHED``: a subscriber that
    comes after the plan started gets its zones, and only the latest message (depth 1)."""
    import os
    from types import SimpleNamespace

    rclpy = pytest.importorskip("rclpy")
    from std_msgs.msg import String
    from support.ros import ros_env, spinning
    from support.waiting import wait_for

    from lang2policy.graph.topics import LATCHED_TOPICS, PLAN_ZONES
    from lang2policy.ros.planner_node import PlannerNode
    from lang2policy.ros.qos import LATCHED

    assert PLAN_ZONES in LATCHED_TOPICS and PLAN_ZONES.type == "std_msgs/msg/String"
    with pytest.MonkeyPatch.context() as mp:
        for key, value in ros_env(1 + (os.getpid() + 183) % 200).items():
            mp.setenv(key, value)
        context = rclpy.Context()
        rclpy.init(context=context)
        planner = rclpy.create_node("zones_publisher", context=context)
        late = rclpy.create_node("late_safety", context=context)
        host = SimpleNamespace(
            _zones=planner.create_publisher(String, PLAN_ZONES.name, LATCHED),
            get_logger=planner.get_logger,
        )
        PlannerNode.send_plan_zones(host, None, {})
        PlannerNode.send_plan_zones(host, "plan-1", {"person_side": PERSON_SIDE})
        heard: list[tuple] = []
        with spinning(context, [planner, late]):
            late.create_subscription(
                String, PLAN_ZONES.name, lambda m: heard.append(decode_plan_zones(m.data)), LATCHED
            )
            wait_for(lambda: heard, 10, "the latched zones")
            time.sleep(0.3)  # an older message would have come by now
    assert heard == [("plan-1", {"person_side": BoxConfig(PERSON_SIDE.min, PERSON_SIDE.max)})]
