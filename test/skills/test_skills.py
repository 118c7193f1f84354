"""Skill definitions and the simulated skill backend: arguments are bound or rejected with
messages that say what is allowed, targets are known before the arm moves, and every skill does
what it says in the real simulation."""

import ast
import math

import jsonschema
import numpy as np
import pytest

from lang2policy.errors import (
    InvalidIntentError,
    Lang2PolicyError,
    MotionTimeExceeded,
    UnknownObjectError,
    UnreachableError,
)
from lang2policy.skills.backend import SimSkillBackend
from lang2policy.skills.catalog import CORNERS, PROMPT_SKILLS, SKILLS, prompt_api
from lang2policy.skills.geometry import corner_names

OBJECTS = ["red block", "green block", "blue bowl"]


# ---------------------------------------------------------------- binding
def test_bind_fills_defaults_with_plain_python_values():
    assert SKILLS["pick"].bind({"obj": "red block"}) == {"obj": "red block", "speed": 0.15}
    bound = SKILLS["move_to"].bind({"position": (0, 0.1, 1), "speed": 0.2})
    assert bound == {"position": [0.0, 0.1, 1.0], "speed": 0.2}
    assert type(bound["position"]) is list
    assert all(type(v) is float for v in bound["position"])
    place = SKILLS["place"].bind({"target": [0.2, 0.0, 0.0]})
    assert place == {"target": [0.2, 0.0, 0.0], "speed": 0.15}
    assert SKILLS["place"].bind({"target": "blue bowl"})["target"] == "blue bowl"
    assert SKILLS["get_obj_names"].bind({}) == {}


def test_bind_is_idempotent():
    for name, args in [
        ("pick", {"obj": "red block"}),
        ("push", {"obj": "red block", "target": [0.2, 0.0, 0.0], "speed": 0.1}),
        ("get_corner_pos", {"corner": "top left"}),
    ]:
        once = SKILLS[name].bind(args)
        assert SKILLS[name].bind(once) == once


LONG = "x" * 10_000
BAD_CALLS = [
    ("pick", {"obj": "red block", "colour": "red"}, "colour", "obj, speed"),
    ("pick", {}, "obj", "object"),
    ("pick", {"obj": 3}, "obj", "object"),
    ("pick", {"obj": "red block", "speed": "fast"}, "speed", "0.01"),
    ("pick", {"obj": "red block", "speed": True}, "speed", "0.01"),
    ("pick", {"obj": "red block", "speed": 0.9}, "speed", "0.5"),
    ("pick", {"obj": "red block", "speed": 0.001}, "speed", "0.01"),
    ("pick", {"obj": "red block", "speed": math.nan}, "speed", "0.01"),
    ("pick", {"obj": "red block", "speed": math.inf}, "speed", "0.01"),
    ("move_to", {"position": [0.2, 0.0]}, "position", "3"),
    ("move_to", {"position": [0.2, 0.0, math.nan]}, "position", "3"),
    ("move_to", {"position": [0.2, -math.inf, 0.1]}, "position", "3"),
    ("move_to", {"position": [0.2, 0.0, 11.0]}, "position", "10"),
    ("move_to", {"position": [0.2, True, 0.1]}, "position", "3"),
    ("move_to", {"position": "up"}, "position", "3"),
    ("move_to", {"position": LONG}, "position", "3"),
    ("place", {"target": {"x": 1}}, "target", "object"),
    ("say", {"text": LONG}, "text", "500"),
    ("say", {"text": None}, "text", "string"),
    ("get_corner_pos", {"corner": "upper left"}, "corner", "'top left'"),
    ("push", {"obj": "red block", "target": [0.2, 0.0, 0.0], "speed": -1}, "speed", "0.01"),
]


@pytest.mark.parametrize(("skill", "args", "param", "allowed"), BAD_CALLS)
def test_bind_rejects_bad_arguments_saying_what_is_allowed(skill, args, param, allowed):
    with pytest.raises(InvalidIntentError) as caught:
        SKILLS[skill].bind(args)
    message = str(caught.value)
    assert message.startswith(f"{skill}("), message
    assert param in message.split("=", 1)[0], "the message names the parameter"
    assert "allowed: " in message and allowed in message.split("allowed: ", 1)[1], message
    assert len(message) < 400, "huge values must be cut in messages"


def test_args_schemas_are_valid_json_schema_and_agree_with_bind():
    for skill in SKILLS.values():
        schema = skill.args_schema()
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["additionalProperties"] is False
        assert set(schema["properties"]) == {p.name for p in skill.params}
    validator = jsonschema.Draft202012Validator(SKILLS["push"].args_schema())
    good = SKILLS["push"].bind({"obj": "red block", "target": [0.2, 0.0, 0.0]})
    assert validator.is_valid(good)
    assert not validator.is_valid({**good, "extra": 1})
    assert not validator.is_valid({**good, "target": [0.2, 0.0]})
    assert not validator.is_valid({**good, "speed": 0.9})


def test_object_args_are_the_names_a_call_refers_to():
    put = SKILLS["put_first_on_second"]
    assert put.object_args(put.bind({"obj": "red block", "target": "blue bowl"})) == [
        "red block",
        "blue bowl",
    ]
    assert put.object_args(put.bind({"obj": "red block", "target": [0.2, 0, 0]})) == ["red block"]
    assert SKILLS["is_obj_visible"].object_args({"obj": "red block"}) == []


def test_signatures_and_prompt_api_cover_every_skill():
    assert SKILLS["pick"].signature() == "pick(obj: str, speed: float = 0.15) -> None"
    api = prompt_api(vla=True)  # every skill; without a VLA, all but vla_skill
    tree = ast.parse(api)  # the stubs are valid Python
    defined = [node.name for node in tree.body if isinstance(node, ast.FunctionDef)]
    assert defined == list(SKILLS)
    assert "vla_skill" not in prompt_api() and list(PROMPT_SKILLS) == defined[:-1]
    for node in tree.body:
        assert ast.get_docstring(node), f"{node.name} has no docstring"
    for skill in SKILLS.values():
        assert skill.signature() in api


def test_corner_names_match_the_catalog():
    assert set(CORNERS) == set(corner_names())


# ---------------------------------------------------------------- the simulated backend


@pytest.fixture
def backend(session) -> SimSkillBackend:
    session.reset(4, OBJECTS)
    return SimSkillBackend(session)


def call(backend: SimSkillBackend, skill: str, time_limit: float | None = None, **args):
    return backend.execute(skill, SKILLS[skill].bind(args), time_limit=time_limit)


def near(points, point, tolerance=1e-6) -> bool:
    return bool(np.min(np.linalg.norm(np.array(points) - np.asarray(point), axis=1)) < tolerance)


def assert_dense_path(points, start, step=0.0101):
    """A sampled path: from where the tool is now, no gap wider than about a centimetre."""
    points = np.array(points)
    np.testing.assert_allclose(points[0], start, atol=1e-6)
    assert np.linalg.norm(np.diff(points, axis=0), axis=1).max() <= step


def test_targets_are_the_sampled_tool_path_computed_without_moving_the_arm(backend, session):
    before, time = session.world.arm_qpos(), session.world.time
    tool = session.primitives.tool_point()
    block = session.world.object_pose("red block").position
    up = np.array([0, 0, session.world.description.grasp.approach_height])
    pick = backend.targets("pick", SKILLS["pick"].bind({"obj": "red block"}))
    assert_dense_path(pick, tool)
    assert near(pick, block) and near(pick, block + up)
    move = backend.targets("move_to", SKILLS["move_to"].bind({"position": [0.2, 0.0, 0.1]}))
    assert move[-1] == (0.2, 0.0, 0.1) and len(move) > 10
    np.testing.assert_allclose(move[0], tool, atol=1e-6)
    put = backend.targets(
        "put_first_on_second",
        SKILLS["put_first_on_second"].bind({"obj": "red block", "target": "blue bowl"}),
    )
    bowl = session.world.object_pose("blue bowl").position
    assert_dense_path(put, tool)
    assert min(np.linalg.norm(np.array(p[:2]) - bowl[:2]) for p in put) < 1e-9
    push_args = SKILLS["push"].bind({"obj": "red block", "target": [0.15, 0.09, 0.0]})
    push = backend.targets("push", push_args)
    assert_dense_path(push, tool)
    home = backend.targets("go_home", SKILLS["go_home"].bind({}))
    np.testing.assert_allclose(home[-1], session.primitives.tool_point(session.world.arm.home))
    for skill in ("get_obj_names", "open_gripper", "close_gripper"):
        assert backend.targets(skill, {}) == [] and backend.sweep(skill, {}) == []
    assert backend.targets("say", {"text": "hi"}) == []
    assert session.world.time == time
    np.testing.assert_array_equal(session.world.arm_qpos(), before)
    assert all(type(v) is float for point in push for v in point)


def test_sweep_covers_the_rest_of_the_gripper(backend, session):
    """The sweep bounds the gripper's geometry (issue 13, finding 4): the ee site on the fixed
    jaw, at every point of the joint-space path, lies inside the swept hull points' box."""
    kin = session.primitives.kin
    move_args = SKILLS["move_to"].bind({"position": [0.2, 0.05, 0.1]})
    sweep = np.array(backend.sweep("move_to", move_args))
    q0 = session.primitives.joints()
    goal = session.primitives.plan_move_to(np.array([0.2, 0.05, 0.1]))
    sites = np.array([kin.forward(q0 + (goal - q0) * t).position for t in np.linspace(0, 1, 40)])
    assert (sites >= sweep.min(0) - 1e-9).all() and (sites <= sweep.max(0) + 1e-9).all()
    assert len(sweep) > len(backend.targets("move_to", move_args))  # more than one point each
    pick_args = SKILLS["pick"].bind({"obj": "red block"})
    ring = np.array(backend.sweep("pick", pick_args))
    assert len(ring) == 8 * len(backend.targets("pick", pick_args))


def test_pick_and_place_put_the_block_in_the_bowl(backend, session):
    assert call(backend, "pick", obj="red block") is None
    assert session.primitives.holding == "red block"
    call(backend, "place", target="blue bowl")
    session.world.step_seconds(0.5)
    assert session.world.is_in("red block", "blue bowl")


def test_put_first_on_second_at_a_point_on_the_table(backend, session):
    call(backend, "put_first_on_second", obj="green block", target=[0.2, 0.06, 0.3])
    session.world.step_seconds(0.3)
    position = session.world.object_pose("green block").position
    assert np.linalg.norm(position[:2] - [0.2, 0.06]) < 0.01
    assert position[2] == pytest.approx(session.world.description.objects.block_half, abs=0.003)


def test_move_to_reaches_the_point_and_get_ee_pos_reports_it(backend, session):
    call(backend, "move_to", position=[0.22, -0.05, 0.07])
    assert np.linalg.norm(np.array(call(backend, "get_ee_pos")) - [0.22, -0.05, 0.07]) < 0.01
    pose = call(backend, "get_ee_pose")
    assert set(pose) == {"position", "quaternion"}
    assert np.linalg.norm(pose["quaternion"]) == pytest.approx(1.0, abs=1e-3)
    assert session.primitives.tcp_speed is None and session.primitives.deadline is None


def test_speed_argument_caps_the_tool_speed(backend, session):
    start = session.world.time
    call(backend, "move_to", position=[0.2, 0.1, 0.08], speed=0.03)
    slow = session.world.time - start
    call(backend, "go_home")
    start = session.world.time
    call(backend, "move_to", position=[0.2, 0.1, 0.08], speed=0.06)
    fast = session.world.time - start
    assert (slow - 0.25) / (fast - 0.25) == pytest.approx(2.0, rel=0.15)


def test_time_limit_stops_the_arm_and_it_stays_still(backend, session):
    start = backend.clock()
    with pytest.raises(MotionTimeExceeded, match=r"budget allows 0\.30 s"):
        call(backend, "move_to", time_limit=0.3, position=[0.2, 0.1, 0.05], speed=0.05)
    assert backend.clock() - start < 0.7
    held = session.world.arm_qpos()
    session.world.step_seconds(1.0)
    assert np.abs(session.world.arm_qpos() - held).max() < 0.01
    assert session.primitives.deadline is None and session.primitives.tcp_speed is None


def test_unknown_object_lists_the_objects_present(backend, session):
    before = session.world.arm_qpos()
    for skill, args in [
        ("pick", {"obj": "purple cat"}),
        ("get_obj_pos", {"obj": "purple cat"}),
        ("put_first_on_second", {"obj": "red block", "target": "pink bowl"}),
    ]:
        with pytest.raises(UnknownObjectError, match="objects present") as caught:
            backend.execute(skill, SKILLS[skill].bind(args))
        assert all(name in str(caught.value) for name in OBJECTS)
        with pytest.raises(UnknownObjectError):
            backend.targets(skill, SKILLS[skill].bind(args))
    np.testing.assert_array_equal(session.world.arm_qpos(), before)


def test_calls_that_cannot_work_are_refused_before_moving(backend, session):
    before = session.world.arm_qpos()
    with pytest.raises(InvalidIntentError, match="holds nothing"):
        call(backend, "place", target="blue bowl")
    with pytest.raises(InvalidIntentError, match="only blocks"):
        call(backend, "pick", obj="blue bowl")
    with pytest.raises(InvalidIntentError, match="no skill named"):
        backend.execute("fly", {})
    np.testing.assert_array_equal(session.world.arm_qpos(), before)


def test_unreachable_move_raises_and_the_arm_holds(backend, session):
    before = session.world.arm_qpos()
    with pytest.raises(Lang2PolicyError, match="out of reach"):
        call(backend, "move_to", position=[0.6, 0.0, 0.1])
    session.world.step_seconds(0.3)
    np.testing.assert_allclose(session.world.arm_qpos(), before, atol=5e-3)


def test_push_moves_the_block_and_visits_its_targets(backend, session):
    block = session.world.object_pose("red block").position
    target = block - [0.0, 0.05 * np.sign(block[1]), 0.0]  # 5 cm towards the middle
    args = SKILLS["push"].bind({"obj": "red block", "target": target.tolist()})
    targets = backend.targets("push", args)
    push_part = np.array(backend._waypoints("push", args))  # the contact part, before moving
    lowest = []
    session.robot.observers.append(lambda: lowest.append(session.primitives.tool_point()))
    try:
        backend.execute("push", args)
    finally:
        session.robot.observers.clear()
    session.world.step_seconds(0.3)
    assert np.linalg.norm(session.world.object_pose("red block").position[:2] - target[:2]) < 0.02
    visited = np.array(lowest)
    # The announced path is the one the tool took: the push itself within a centimetre, the
    # transit's corners (approximated before planning) within the sweep ring's 2.6 cm.
    for point in push_part:
        assert np.min(np.linalg.norm(visited - point, axis=1)) < 0.01
    for point in targets:
        assert np.min(np.linalg.norm(visited - point, axis=1)) < 0.026


def test_push_out_of_reach_still_announces_its_targets_then_raises(backend, session):
    before = session.world.arm_qpos()
    args = SKILLS["push"].bind({"obj": "red block", "target": [0.9, 0.9, 0.0]})
    targets = np.array(backend.targets("push", args))  # for the policy to judge, no IK needed
    assert np.min(np.linalg.norm(targets[:, :2] - [0.9, 0.9], axis=1)) < 0.05
    with pytest.raises(UnreachableError, match="out of reach"):
        backend.execute("push", args)
    session.world.step_seconds(0.3)
    np.testing.assert_allclose(session.world.arm_qpos(), before, atol=5e-3)


def test_queries_return_plain_data_about_the_scene(backend, session):
    world = session.world
    assert sorted(call(backend, "get_obj_names")) == sorted(OBJECTS)
    block = world.object_pose("red block").position
    position = call(backend, "get_obj_pos", obj="red block")
    assert type(position) is list and np.allclose(position, block, atol=2e-4)
    low, high = np.array(call(backend, "get_bbox", obj="red block"))
    half = world.description.objects.block_half
    assert np.all(low < block) and np.all(block < high)
    assert high[2] - low[2] == pytest.approx(2 * half, abs=1e-3)
    assert 2 * half - 1e-3 <= high[0] - low[0] <= 2 * half * math.sqrt(2) + 1e-3
    bowl_low, bowl_high = np.array(call(backend, "get_bbox", obj="blue bowl"))
    assert bowl_high[0] - bowl_low[0] >= 2 * world.description.objects.bowl_radius
    assert bowl_low[2] == pytest.approx(0.0, abs=2e-3)
    assert call(backend, "is_obj_visible", obj="red block") is True
    assert call(backend, "is_obj_visible", obj="purple block") is False  # parked under the table
    ws = world.description.workspace
    assert call(backend, "get_table_bounds") == [[ws.x[0], ws.y[0]], [ws.x[1], ws.y[1]]]
    corners = {c: np.array(call(backend, "get_corner_pos", corner=c)) for c in CORNERS}
    assert corners["top"][0] > corners["center"][0] > corners["bottom"][0]
    assert corners["left"][1] > corners["center"][1] > corners["right"][1]
    assert corners["top left"][0] > corners["bottom left"][0]
    assert corners["top left"][1] > corners["top right"][1]
    for point in corners.values():
        assert point[2] == 0.0
        assert ws.min_radius <= math.hypot(*point[:2]) <= ws.max_radius
        assert ws.x[0] <= point[0] <= ws.x[1] and ws.y[0] <= point[1] <= ws.y[1]


def test_say_records_text_and_gripper_skills_work(backend, session):
    assert call(backend, "say", text="hello") is None
    call(backend, "say", text="done")
    assert backend.said() == ["hello", "done"]
    call(backend, "close_gripper")
    assert session.world.gripper_opening() < 0.1
    call(backend, "open_gripper")
    assert session.world.gripper_opening() > 0.9


def test_hold_keeps_the_arm_where_it_is(backend, session):
    call(backend, "move_to", position=[0.2, 0.0, 0.1])
    backend.hold()
    held = session.world.arm_qpos()
    session.world.step_seconds(1.0)
    assert np.abs(session.world.arm_qpos() - held).max() < 0.01
    assert backend.clock() == pytest.approx(session.world.time)
