"""The motion filter and its config (pure core, no ROS).

Most rules are checked on a two-joint "planar" arm whose tool point is (a, b, 0.1), so every
expected number can be worked out by hand; the real SO-101 model checks the kinematics, the
packaged limits and the speed of a streamed command.
"""

from __future__ import annotations

import math
import time

import mujoco
import numpy as np
import pytest
from support.safety import MEASURED, NAMES, planar_filter

from lang2policy.errors import ConfigError
from lang2policy.safety import (
    CHECK_STEP,
    BoxConfig,
    Trajectory,
    load_safety_config,
    motion_filter_for,
)
from lang2policy.scene.world import World


def command(points, names=NAMES) -> Trajectory:
    return Trajectory.of(names, points)


def times_of(trajectory: Trajectory) -> list[float]:
    return [t for t, _ in trajectory.points]


def column(trajectory: Trajectory, j: int) -> list[float]:
    return [values[j] for _, values in trajectory.points]


# ---------------------------------------------------------------------- validity
@pytest.mark.parametrize(
    ("points", "reason"),
    [
        ([(1.0, (math.nan, 0.0, 1.0))], "non-finite positions for ['a']"),
        ([(0.5, (0.1, 0.0, 1.0)), (1.0, (0.2, math.inf, 1.0))], "point 1 has non-finite"),
        ([(1.0, (0.1, 0.0, -math.inf))], "non-finite positions for ['gripper']"),
        ([(math.nan, (0.1, 0.0, 1.0))], "non-finite time_from_start"),
    ],
)
def test_non_finite_values_drop_the_whole_command(points, reason):
    result = planar_filter().filter(command(points), MEASURED)
    assert result.rejected and result.trajectory is None
    assert result.rules() == {"non_finite"}
    assert reason in result.summary


@pytest.mark.parametrize(
    ("names", "points", "reason"),
    [
        (("a", "elbow"), [(1.0, (0.1, 0.2))], "unknown joints ['elbow']; allowed joint names"),
        (("a", "a"), [(1.0, (0.1, 0.2))], "named more than once: ['a']"),
        (("a", "b"), [(1.0, (0.1,))], "point 0 has 1 positions; it must have one per joint"),
        (("a",), [(1.0, (0.1,)), (0.5, (0.2,))], "times must be non-decreasing"),
        (("a",), [(-0.1, (0.1,))], "negative time_from_start"),
        ((), [(1.0, ())], "no joint names"),
        (("a",), [(1.0, ("far",))], "non-finite positions for ['a']"),
    ],
)
def test_malformed_commands_are_rejected_with_the_reason(names, points, reason):
    result = planar_filter().filter(command(points, names), MEASURED)
    assert result.rejected
    assert reason in result.summary


def test_a_hold_passes_unchanged():
    hold = Trajectory.hold(NAMES)
    result = planar_filter().filter(hold, MEASURED)
    assert result.trajectory == hold and not result.violations


def test_a_command_within_every_limit_passes_unchanged():
    cmd = command([(0.5, (0.2, -0.1, 0.5)), (1.0, (0.3, -0.3, 0.0))])
    result = planar_filter().filter(cmd, MEASURED)
    assert result.trajectory == cmd and result.violations == ()


# ---------------------------------------------------------------------- joint limits
def test_positions_are_clamped_to_the_joint_limits_minus_the_margin():
    cmd = command([(3.0, (-0.9, 0.3, 1.4)), (6.0, (-2.5, 0.3, -0.2))])
    result = planar_filter(workspace=BoxConfig((-3, -3, 0), (3, 3, 1))).filter(cmd, MEASURED)
    assert not result.rejected
    assert column(result.trajectory, 0) == pytest.approx([-0.9, -1.9])  # -2.0 + margin 0.1
    assert column(result.trajectory, 1) == pytest.approx([0.3, 0.3])
    assert column(result.trajectory, 2) == pytest.approx([1.0, 0.0])  # gripper: 0..1, no margin
    assert result.rules() == {"joint_limit"}
    assert "a clamped at 1 of 2 points" in result.summary
    assert "gripper clamped at 2 of 2 points" in result.summary
    assert "b clamped" not in result.summary


def test_a_margin_wider_than_the_range_is_a_config_error():
    with pytest.raises(ConfigError, match="leaves no range for"):
        planar_filter(joint_limit_margin=2.5)


# ---------------------------------------------------------------------- joint speed
def test_fast_segments_are_retimed_not_clipped():
    # 0 -> 0.2 in 0.1 s (2 rad/s) then 0.2 -> 0.3 in 0.5 s (0.2 rad/s): only the first is slow.
    cmd = command([(0.1, (0.2, 0.0, 1.0)), (0.6, (0.3, 0.0, 1.0))])
    result = planar_filter().filter(cmd, MEASURED)
    assert column(result.trajectory, 0) == pytest.approx([0.2, 0.3])  # the path is kept
    assert times_of(result.trajectory) == pytest.approx([0.2, 0.7])  # 0.2 rad at 1 rad/s
    assert result.rules() == {"velocity"}
    assert "retimed 1 of 2 segments" in result.summary
    assert "a 2.00 rad/s from the measured state to point 0" in result.summary


def test_speed_between_points_is_limited_and_later_points_shift():
    cmd = command([(0.5, (0.1, 0.0, 1.0)), (0.6, (0.6, -0.5, 1.0)), (2.0, (0.7, -0.5, 1.0))])
    result = planar_filter(keep_out={}).filter(cmd, MEASURED)
    segments = np.diff([0.0, *times_of(result.trajectory)])
    assert segments == pytest.approx([0.5, 0.5, 1.4])  # 0.5 rad needs 0.5 s at 1 rad/s
    assert "a 5.00 rad/s into point 1" in result.summary


def test_a_jump_at_time_zero_is_given_time():
    result = planar_filter().filter(command([(0.0, (-0.3, 0.0, 1.0))]), MEASURED)
    assert times_of(result.trajectory) == pytest.approx([0.3])
    assert "a jump (no time)" in result.summary


def test_the_first_point_may_lead_the_measured_position_by_the_allowance():
    cmd = command([(0.02, (0.05, 0.0, 1.0)), (0.04, (0.07, 0.0, 1.0))])
    lenient = planar_filter(lead_allowance=0.04).filter(cmd, MEASURED)
    assert lenient.trajectory == cmd  # 0.05 rad <= 0.04 + 1 rad/s x 0.02 s
    strict = planar_filter(lead_allowance=0.0).filter(cmd, MEASURED)
    assert times_of(strict.trajectory) == pytest.approx([0.05, 0.07])


def test_the_gripper_has_no_speed_limit():
    cmd = command([(0.02, (0.0, 0.0, 0.0))])
    assert planar_filter().filter(cmd, MEASURED).trajectory == cmd


# ---------------------------------------------------------------------- zones
def test_a_path_leaving_the_workspace_is_cut_at_the_last_safe_point():
    cmd = command([(1.0, (0.0, 0.6, 1.0)), (2.0, (0.0, 1.4, 1.0)), (3.0, (0.0, 0.0, 1.0))])
    result = planar_filter().filter(cmd, MEASURED)
    kept = result.trajectory
    assert result.rules() == {"workspace"}
    assert len(kept.points) == 2  # point 0, then the last safe sample towards point 1
    b_end = column(kept, 1)[-1]
    assert 1.0 - CHECK_STEP <= b_end <= 1.0  # stops inside, within one sample of the face
    assert times_of(kept)[-1] == pytest.approx(1.0 + (b_end - 0.6) / 0.8)  # time interpolated
    assert "would leave the workspace box" in result.summary
    assert "on the way to point 1" in result.summary


def test_a_path_through_a_keep_out_zone_is_cut_before_it():
    cmd = command([(2.0, (1.0, 0.0, 1.0))])
    result = planar_filter().filter(cmd, MEASURED)
    assert result.rules() == {"keep_out"}
    a_end = column(result.trajectory, 0)[-1]
    assert 0.4 - CHECK_STEP <= a_end <= 0.4  # a point on the face is not inside
    assert "keep-out zone 'post'" in result.summary


def test_the_path_between_points_is_checked_not_only_the_points():
    # Both points are outside the post, but the straight joint path between them crosses it.
    cmd = command([(1.0, (0.3, 0.0, 1.0)), (2.0, (0.7, 0.0, 1.0))])
    result = planar_filter().filter(cmd, MEASURED)
    assert result.rules() == {"keep_out"}
    assert column(result.trajectory, 0)[-1] <= 0.4


def test_a_command_violating_at_once_holds_the_arm():
    at_face = {"a": 0.0, "b": 1.0, "gripper": 1.0}
    result = planar_filter().filter(command([(1.0, (0.0, 1.5, 1.0))]), at_face)
    assert not result.rejected and result.trajectory.is_hold
    assert "nothing before it is safe: the arm holds where it is" in result.summary


def test_an_arm_outside_may_come_back_but_not_go_further_out():
    outside = {"a": 0.0, "b": 1.3, "gripper": 1.0}
    back = command([(1.0, (0.0, 0.5, 1.0))])
    assert planar_filter().filter(back, outside).trajectory == back
    further = planar_filter().filter(command([(1.0, (0.0, 1.6, 1.0))]), outside)
    assert further.trajectory.is_hold and further.rules() == {"workspace"}


def test_an_arm_outside_may_take_a_path_as_deep_as_it_already_is_but_no_deeper():
    # A servo that sags 3 mm past the box (b <= 1.0) at its edge: the way back may arc
    # outward a little, as an MPC's first millimetres do, while it stays within 3 mm.
    sagged = {"a": 0.0, "b": 1.003, "gripper": 1.0}
    arc = command([(0.5, (0.0, 1.001, 1.0)), (1.0, (0.0, 1.0025, 1.0)), (2.0, (0.0, 0.5, 1.0))])
    assert planar_filter().filter(arc, sagged).trajectory == arc
    deeper = command([(0.5, (0.0, 1.001, 1.0)), (1.0, (0.0, 1.0035, 1.0)), (2.0, (0.0, 0.5, 1.0))])
    result = planar_filter().filter(deeper, sagged)
    assert result.rules() == {"workspace"} and len(result.trajectory.points) < 3


def test_far_outside_a_way_back_may_waver_within_the_depth_and_must_end_nearer():
    # 3 cm out, past RECOVERY_DEPTH (5 mm): a path that wavers (1 cm, back to 2 cm) but never
    # deeper than 3 cm and ends inside is the way back; one that ends as deep as it started, or
    # goes deeper, is not (repeated wandering must not ratchet the arm outward)
    far_out = {"a": 0.0, "b": 1.03, "gripper": 1.0}
    wander = command([(0.5, (0.0, 1.01, 1.0)), (1.0, (0.0, 1.02, 1.0)), (2.0, (0.0, 0.5, 1.0))])
    assert planar_filter().filter(wander, far_out).trajectory == wander
    stays = command([(0.5, (0.0, 1.01, 1.0)), (1.0, (0.0, 1.03, 1.0))])
    assert planar_filter().filter(stays, far_out).rules() == {"workspace"}
    deeper = command([(0.5, (0.0, 1.035, 1.0)), (2.0, (0.0, 0.5, 1.0))])
    result = planar_filter().filter(deeper, far_out)
    assert result.rules() == {"workspace"} and result.trajectory.is_hold
    settle = command([(0.5, (0.0, 1.002, 1.0)), (1.0, (0.0, 1.004, 1.0)), (2.0, (0.0, 0.5, 1.0))])
    assert planar_filter().filter(settle, far_out).trajectory == settle


def test_inside_a_keep_out_zone_every_sample_must_get_shallower():
    # The post spans b in -0.1..0.1: at b = 0.05 the arm is 0.05 deep; stepping to 0.07 (0.03
    # deep) and back to 0.06 (0.04, still shallower than the start) is a stroll inside: cut.
    inside_post = {"a": 0.5, "b": 0.05, "gripper": 1.0}
    stroll = command([(0.5, (0.5, 0.07, 1.0)), (1.0, (0.5, 0.06, 1.0))])
    result = planar_filter().filter(stroll, inside_post)
    assert result.rules() == {"keep_out"} and len(result.trajectory.points) == 1


def test_joints_a_command_does_not_name_keep_their_measured_position():
    measured = {"a": 0.5, "b": 0.5, "gripper": 1.0}  # b = 0.5: clear of the post (y <= 0.1)
    only_a = command([(1.0, (0.3,)), (2.0, (0.7,))], names=("a",))
    result = planar_filter().filter(only_a, measured)
    assert result.trajectory == only_a and result.trajectory.names == ("a",)
    inside_post = {"a": 0.5, "b": 0.0, "gripper": 1.0}
    assert planar_filter().filter(only_a, inside_post).rules() == {"keep_out"}


def test_a_measured_state_must_name_every_joint_with_a_finite_value():
    f = planar_filter()
    assert "lacks ['gripper']" in f.state_problem({"a": 0.0, "b": 0.0})
    assert "non-finite positions for ['b']" in f.state_problem({**MEASURED, "b": math.nan})
    assert f.state_problem(MEASURED) is None


# ---------------------------------------------------------------------- config
def write(tmp_path, text: str):
    path = tmp_path / "safety.yaml"
    path.write_text(text)
    return path


GOOD = """
so101:
  max_joint_speed: 1.5
  workspace: {min: [0.0, -0.3, 0.0], max: [0.4, 0.3, 0.4]}
  state_timeout: 0.2
  command_timeout: 0.25
"""


def test_the_packaged_config_has_both_robots_with_sane_limits():
    for robot in ("so101", "panda"):
        config = load_safety_config(robot)
        assert config.max_joint_speed > 0 and config.state_timeout > 0
        assert all(
            lo < hi for lo, hi in zip(config.workspace.min, config.workspace.max, strict=True)
        )
        assert "robot_base" in config.keep_out


def test_a_minimal_config_gets_defaults(tmp_path):
    config = load_safety_config("so101", write(tmp_path, GOOD))
    assert (config.joint_limit_margin, config.lead_allowance, config.keep_out) == (0.0, 0.0, {})
    assert config.workspace.max == (0.4, 0.3, 0.4)


@pytest.mark.parametrize(
    ("text", "robot", "message"),
    [
        (GOOD, "ur5", "no safety limits for robot 'ur5'; it has ['so101']"),
        (GOOD + "  max_speed: 2\n", "so101", "unknown key(s) ['max_speed']; valid keys"),
        (GOOD.replace("1.5", "fast"), "so101", "max_joint_speed: expected a number"),
        (GOOD.replace("1.5", "-1.5"), "so101", "max_joint_speed: must be a finite number > 0"),
        (GOOD.replace("0.25", ".nan"), "so101", "command_timeout: must be a finite number > 0"),
        (GOOD.replace("0.4, 0.3, 0.4", "0.4, 0.3, -0.1"), "so101", "min z (0.0) must be below"),
        (GOOD.replace("[0.0, -0.3, 0.0]", "[0.0, 0.0]"), "so101", "expected 3 values, got 2"),
        (
            GOOD + "  keep_out: {post: {min: [1, 0, 0], max: [0, 1, 1]}}\n",
            "so101",
            "keep_out.post: min x (1.0) must be below max x (0.0)",
        ),
        (GOOD + "  joint_limit_margin: -0.1\n", "so101", "must be a finite number >= 0"),
        (GOOD.replace("  state_timeout: 0.2\n", ""), "so101", "missing required key"),
    ],
)
def test_bad_configs_fail_loudly_saying_what_is_allowed(tmp_path, text, robot, message):
    with pytest.raises(ConfigError) as info:
        load_safety_config(robot, write(tmp_path, text))
    assert message in str(info.value)


# ---------------------------------------------------------------------- the real SO-101
@pytest.fixture(scope="module")
def so101():
    return motion_filter_for("so101", load_safety_config("so101"))


def home_state(world: World) -> dict[str, float]:
    return {**dict(zip(world.arm.joint_names, world.arm.home, strict=True)), "gripper": 1.0}


def independent_tool_point(world: World, joints: dict[str, float]) -> np.ndarray:
    """Tool centre from the simulation's own scene model: site + rotation @ grasp offset."""
    world.data.qpos[world.arm.qpos_adr] = [joints[n] for n in world.arm.joint_names]
    mujoco.mj_kinematics(world.model, world.data)
    site = world.arm.ee_site_id
    offset = np.array(world.description.grasp.center_offset)
    return world.data.site_xpos[site] + world.data.site_xmat[site].reshape(3, 3) @ offset


def test_so101_joint_ranges_come_from_the_model(so101, world):
    assert so101.names == world.arm.action_names
    margin = load_safety_config("so101").joint_limit_margin
    assert so101.lower[:-1] == pytest.approx(world.arm.lower + margin)
    assert so101.upper[:-1] == pytest.approx(world.arm.upper - margin)


def test_so101_tool_point_matches_the_simulation(so101, world):
    rng = np.random.default_rng(0)
    for _ in range(5):
        q = rng.uniform(world.arm.lower, world.arm.upper)
        joints = dict(zip(world.arm.joint_names, q, strict=True))
        assert so101.tool_point(q) == pytest.approx(independent_tool_point(world, joints), abs=1e-9)


def test_so101_swinging_behind_the_base_is_cut_inside_the_box(so101, world):
    start = home_state(world)
    swing = Trajectory.from_named(
        so101.names,
        [(3.0, {**start, "shoulder_pan": 1.9})],  # within the joint range
    )
    result = so101.filter(swing, start)
    assert result.rules() == {"workspace"}
    last = dict(zip(result.trajectory.names, result.trajectory.points[-1][1], strict=True))
    assert 0.9 < last["shoulder_pan"] < 1.9
    box = load_safety_config("so101").workspace
    tool = independent_tool_point(world, last)
    assert np.all(tool >= np.array(box.min) - 1e-9) and np.all(tool <= box.max)


def test_so101_filters_a_streamed_chunk_fast_and_unchanged(so101, world):
    start = home_state(world)
    names = so101.names
    chunk = Trajectory.of(
        names,
        [
            (0.02 * k, [start[n] + (0.024 * k if n == "shoulder_pan" else 0.0) for n in names])
            for k in range(1, 26)
        ],
    )  # 1.2 rad/s over 0.5 s: inside every limit
    result = so101.filter(chunk, start)
    assert result.trajectory == chunk and not result.violations
    started = time.perf_counter()
    for _ in range(20):
        so101.filter(chunk, start)
    per_call = (time.perf_counter() - started) / 20
    assert per_call < 0.01, f"{per_call * 1000:.1f} ms per 25-point command"
