"""Property: whatever a program calls and whatever a person corrects while it runs, the tool
never leaves what the privilege policy allows (issue 13).

Hypothesis draws a policy (the default policy narrowed by a random allowed box, a random
keep-out box and a random speed cap), a program of ``move_to`` calls (inside, near the edges
and outside of the box) and corrections said during its motions (offsets and absolute speeds).
The real sandbox runner, router and edits drive a simulated arm behind a message boundary
(``LiveArm``); the tool centre point is measured after every physics step.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lang2policy.bench.live_arm import OBJECTS, LiveArm
from lang2policy.planning.correcting import ArgEdits, CorrectionRouter
from lang2policy.sandbox.policy import PrivilegePolicy, default_policy, workspace_box
from lang2policy.sandbox.runner import SandboxLimits, SandboxRunner
from lang2policy.skills.catalog import SKILLS
from lang2policy.skills.remote import RemoteSkillBackend

HOME = (0.16, 0.0, 0.10)  # the SO-101's home tool point: inside every drawn box
TRACKING = 0.006  # m: the tool may trail its planned path by this much while tracking
SPEED_SLACK = 1.25  # peak tool speed over 20 ms windows, relative to the cap
LIMITS = SandboxLimits(wall_seconds=30, cpu_seconds=10, memory_mb=512)
MOTION_SKILLS = ["move_to", "go_home", "pick", "place", "put_first_on_second", "push"]


@pytest.fixture(scope="module")
def paced_arm():
    live = LiveArm(pace=0.002)
    yield live
    live.close()


@st.composite
def policies(draw):
    """(allowed box, keep-out box, speed cap) around the home point."""
    x_max = draw(st.floats(0.22, 0.34))
    y_min, y_max = draw(st.floats(-0.22, -0.04)), draw(st.floats(0.04, 0.22))
    z_max = draw(st.floats(0.14, 0.30))
    allowed = ([0.08, y_min, 0.02], [x_max, y_max, z_max])
    side = draw(st.sampled_from([-1.0, 1.0]))
    edge = draw(st.floats(0.05, 0.12))
    keep_out = ([0.0, edge, -0.1], [1.0, 1.0, 1.0]) if side > 0 else (
        [0.0, -1.0, -0.1], [1.0, -edge, 1.0])
    cap = draw(st.sampled_from([0.05, 0.1, 0.2]))
    return allowed, keep_out, cap


def build_policy(paced_arm: LiveArm, allowed, keep_out, cap: float) -> PrivilegePolicy:
    plan = {
        "version": 1,
        "zones": {
            "allowed": {"min": allowed[0], "max": allowed[1]},
            "keep_out": {"min": keep_out[0], "max": keep_out[1]},
        },
        "rules": [
            {"id": "keep-out", "category": "motion", "effect": "forbid", "priority": 5,
             "when": {"targets_any_in": "keep_out"}},
            {"id": "moves", "skill": MOTION_SKILLS, "effect": "allow", "when": {
                "targets_in": "allowed", "objects_in_scene": True,
                "args": {"speed": {"type": "number", "maximum": cap}}}},
            {"id": "gripper", "skill": ["open_gripper", "close_gripper"], "effect": "allow"},
        ],
    }
    box = workspace_box(paced_arm.world.description)
    base = default_policy(paced_arm.world.description, known_skills=SKILLS)
    return base.narrowed(PrivilegePolicy.from_dict(plan, box, "drawn", known_skills=SKILLS))


points = st.tuples(st.floats(0.10, 0.40), st.floats(-0.28, 0.28), st.floats(0.03, 0.30))
corrections = st.one_of(
    st.sampled_from(["5 cm to the left", "10 cm to the right", "15 cm further", "a bit closer",
                     "10 cm higher", "5 cm lower", "15 cm to the left"]),
    st.sampled_from(["at 50 cm/s", "at 30 cm/s", "much faster", "slower", "at 1 m/s"]),
)


def go_home(paced_arm: LiveArm) -> None:
    runner = SandboxRunner(RemoteSkillBackend(paced_arm.session), default_policy(
        paced_arm.world.description, known_skills=SKILLS), limits=LIMITS)
    outcome = runner.run("go_home(speed=0.25)")
    assert outcome.ok, outcome.summary()


def say_during_motions(backend, router, edits, said: list[str], after: float, paced_arm: LiveArm):
    """Say each correction once a motion has run ``after`` s of sim time."""

    def run():
        for text in said:
            deadline = time.monotonic() + 10
            while backend.current_call is None and time.monotonic() < deadline:
                time.sleep(0.002)
            call = backend.current_call
            if call is None:
                return
            started = paced_arm.world.time
            while paced_arm.world.time < started + after and backend.current_call is not None:
                time.sleep(0.002)
            routed = router.route(text, OBJECTS, instruction="move", code_call=call, edits=edits)
            if routed.action == "edit_code":
                backend.interrupt_for_edit()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def inside(points: np.ndarray, box, margin: float) -> np.ndarray:
    low, high = np.array(box[0]) - margin, np.array(box[1]) + margin
    return np.all((points >= low) & (points <= high), axis=1)


@settings(max_examples=6, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    drawn=policies(),
    targets=st.lists(points, min_size=1, max_size=3),
    speeds=st.lists(st.sampled_from([0.05, 0.1, 0.15, 0.3]), min_size=3, max_size=3),
    said=st.lists(corrections, min_size=1, max_size=3),
    after=st.floats(0.05, 0.6),
)
def test_the_tool_never_leaves_what_the_policy_allows(
    paced_arm, drawn, targets, speeds, said, after
):
    allowed, keep_out, cap = drawn
    go_home(paced_arm)
    policy = build_policy(paced_arm, allowed, keep_out, cap)
    backend = RemoteSkillBackend(paced_arm.session)
    runner = SandboxRunner(backend, policy, limits=LIMITS)
    router = CorrectionRouter(None)
    edits = ArgEdits(lambda: (paced_arm.world.object_names(), {}))
    runner.edits = edits
    program = "\n".join(
        f"try:\n    move_to([{x:.3f}, {y:.3f}, {z:.3f}], speed={s})\nexcept Exception:\n    pass"
        for (x, y, z), s in zip(targets, speeds, strict=False)
    )
    t0 = paced_arm.world.time
    thread = say_during_motions(backend, router, edits, said, after, paced_arm)
    outcome = runner.run(program)
    thread.join(15)
    assert outcome.kind in ("ok", "stopped"), outcome.summary()
    path = paced_arm.since(t0)
    assert inside(path, allowed, TRACKING).all(), (
        f"the tool left {allowed}: {path[~inside(path, allowed, TRACKING)][:3]}")
    assert not inside(path, keep_out, -TRACKING).any(), f"the tool entered {keep_out}"
    assert paced_arm.peak_speed(t0) <= cap * SPEED_SLACK + 0.01
