"""The pure analysis of ``lang2policy bench parity`` on synthetic graphs and trajectories."""

from __future__ import annotations

import numpy as np
import pytest

from lang2policy.bench.parity_analysis import (
    CONTRACT,
    Recording,
    TopicInfo,
    commanded,
    compare_graphs,
    compare_tracking,
    onset,
    rate_stats,
    verdict,
)

NAMES = ["shoulder_pan", "elbow_flex", "gripper"]
RATE = 50.0
COMMAND_TIMES = np.array([0.0, 1.0, 2.0, 3.0])
COMMAND_POINTS = np.array([[0.0, 0.0, 0.5], [0.3, -0.2, 0.8], [0.0, 0.2, 0.6], [0.1, 0.1, 0.5]])


def contract_graph(**overrides: TopicInfo | None) -> dict[str, TopicInfo]:
    graph = {
        topic: TopicInfo(
            (kind,),
            publishers=("backend",) if role == "publishes" else (),
            subscribers=("backend",) if role == "subscribes" else (),
        )
        for topic, (kind, role) in CONTRACT.items()
    }
    graph["/rosout"] = TopicInfo(("rcl_interfaces/msg/Log",), publishers=("backend",))
    graph.update(overrides)
    return {topic: info for topic, info in graph.items() if info is not None}


def recording(
    positions_at, delay: float = 0.0, names: list[str] | None = None, stamp0: float = 100.0
) -> Recording:
    """A recording from -1 s to 6 s around a command sent at ``stamp0``: the pose at time
    ``t`` (s since the command) is ``positions_at(t - delay)``; hold sent at 5.5 s."""
    t = np.arange(-1.0, 6.0, 1.0 / RATE)
    return Recording(
        names=list(names or NAMES),
        stamps=stamp0 + t,
        received=t + 5000.0,
        positions=np.array([positions_at(x - delay) for x in t]),
        command_time=stamp0,
        hold_time=stamp0 + 5.5,
        command_times=COMMAND_TIMES,
        command_positions=COMMAND_POINTS,
    )


def follows_command(t: float) -> np.ndarray:
    """A back-end that tracks the command perfectly."""
    return commanded(COMMAND_TIMES, COMMAND_POINTS, np.array([t]))[0]


# --------------------------------------------------------------------------- graphs
def test_identical_contract_graphs_pass():
    rows, failures = compare_graphs(contract_graph(), contract_graph())
    assert failures == []
    assert {r.topic for r in rows if r.classification == "contract"} == set(CONTRACT)
    assert all(r.ok for r in rows)


def test_clock_only_in_sim_is_by_design():
    clock = TopicInfo(("rosgraph_msgs/msg/Clock",), publishers=("sim",))
    camera = TopicInfo(("sensor_msgs/msg/Image",), publishers=("sim",))
    sim = contract_graph(**{"/clock": clock, "/camera/front/image_raw": camera})
    rows, failures = compare_graphs(sim, contract_graph())
    assert failures == []
    by_topic = {r.topic: r for r in rows}
    assert by_topic["/clock"].classification.startswith("sim-only by design")
    assert by_topic["/clock"].hw == "-"
    assert by_topic["/camera/front/image_raw"].classification.startswith("sim-only by design")


def test_a_contract_type_that_differs_fails():
    wrong = TopicInfo(("std_msgs/msg/String",), publishers=("driver",))
    _, failures = compare_graphs(contract_graph(), contract_graph(**{"/joint_states": wrong}))
    assert len(failures) == 1
    assert "/joint_states on hw has type" in failures[0]


def test_a_missing_contract_topic_or_wrong_role_fails():
    _, missing = compare_graphs(contract_graph(**{"/sim/objects": None}), contract_graph())
    assert missing == ["contract topic /sim/objects missing on sim"]
    publisher = TopicInfo(("trajectory_msgs/msg/JointTrajectory",), publishers=("driver",))
    topic = "/arm_controller/joint_trajectory"
    _, role = compare_graphs(contract_graph(), contract_graph(**{topic: publisher}))
    assert role == [f"{topic}: hw publishes, should subscribes"]


def test_unexplained_one_sided_topic_and_shared_type_mismatch_fail():
    extra = TopicInfo(("std_msgs/msg/String",), publishers=("driver",))
    log = TopicInfo(("std_msgs/msg/String",), publishers=("driver",))
    _, failures = compare_graphs(
        contract_graph(), contract_graph(**{"/driver/debug": extra, "/rosout": log})
    )
    assert "/driver/debug exists only on hw" in failures
    assert any("/rosout: types differ" in f for f in failures)


# --------------------------------------------------------------------------- rates
def test_rate_stats_of_a_regular_and_a_jittery_stream():
    regular = rate_stats(np.arange(0, 2, 0.02))
    assert regular["rate_hz"] == pytest.approx(50.0)
    assert regular["jitter_ms"] == pytest.approx(0.0, abs=1e-6)
    jittery = rate_stats(np.cumsum([0.0] + [0.03, 0.04] * 20))
    assert jittery["rate_hz"] == pytest.approx(1 / 0.035)
    assert jittery["jitter_ms"] == pytest.approx(5.0)
    assert jittery["max_gap_ms"] == pytest.approx(40.0)
    assert rate_stats([1.0])["rate_hz"] == 0.0


# --------------------------------------------------------------------------- tracking
def test_commanded_interpolates_linearly_and_holds_the_ends():
    times, points = np.array([0.0, 2.0]), np.array([[0.0], [1.0]])
    assert commanded(times, points, np.array([-1.0, 0.5, 1.0, 3.0]))[:, 0].tolist() == [
        0.0,
        0.25,
        0.5,
        1.0,
    ]


def test_identical_trajectories_have_zero_difference_and_pass():
    sim, hw = recording(follows_command), recording(follows_command, stamp0=1.7e4)
    tracking = compare_tracking(sim, hw)
    assert tracking["window_s"] == pytest.approx(5.5)
    for figures in tracking["joints"].values():
        assert figures["max_diff"] == pytest.approx(0.0, abs=1e-9)
        assert figures["sim_max_err"] == pytest.approx(0.0, abs=1e-9)
        assert figures["hw_final_err"] == pytest.approx(0.0, abs=1e-9)
    assert verdict([], NAMES, NAMES, tracking) == (True, [])


def test_a_constant_offset_shows_in_max_rms_and_final_error():
    hw = recording(lambda t: follows_command(t) + np.array([0.02, -0.01, 0.0]))
    tracking = compare_tracking(recording(follows_command), hw)
    pan, elbow = tracking["joints"]["shoulder_pan"], tracking["joints"]["elbow_flex"]
    assert pan["max_diff"] == pytest.approx(0.02)
    assert pan["rms_diff"] == pytest.approx(0.02)
    assert pan["hw_final_err"] == pytest.approx(0.02)
    assert elbow["max_diff"] == pytest.approx(0.01)
    assert verdict([], NAMES, NAMES, tracking, arm_bound=0.05)[0]
    ok, reasons = verdict([], NAMES, NAMES, tracking, arm_bound=0.015)
    assert not ok
    assert len(reasons) == 1
    assert reasons[0].startswith("shoulder_pan: max |sim - hw| 0.0200 > bound 0.015 (at ")


def test_a_delay_costs_speed_times_delay_and_moves_the_onset():
    delay = 0.1  # s; the pan ramps at 0.3 rad/s, the elbow at 0.2, then 0.4 rad/s
    tracking = compare_tracking(recording(follows_command), recording(follows_command, delay))
    joints = tracking["joints"]
    assert joints["shoulder_pan"]["max_diff"] == pytest.approx(0.03, abs=1e-6)
    assert joints["elbow_flex"]["max_diff"] == pytest.approx(0.04, abs=1e-6)
    assert joints["shoulder_pan"]["hw_max_err"] == pytest.approx(0.03, abs=1e-6)
    assert joints["shoulder_pan"]["sim_max_err"] == pytest.approx(0.0, abs=1e-9)
    assert tracking["onset_s"]["sim"] == pytest.approx(0.04, abs=0.021)
    assert tracking["onset_s"]["hw"] - tracking["onset_s"]["sim"] == pytest.approx(delay, abs=0.021)


def test_the_gripper_has_its_own_bound():
    hw = recording(lambda t: follows_command(t) + np.array([0.0, 0.0, 0.08]))
    tracking = compare_tracking(recording(follows_command), hw)
    assert verdict([], NAMES, NAMES, tracking, arm_bound=0.05, gripper_bound=0.1)[0]
    ok, reasons = verdict([], NAMES, NAMES, tracking, arm_bound=0.05, gripper_bound=0.05)
    assert not ok and reasons[0].startswith("gripper:")


def test_different_joint_names_or_graph_failures_fail_with_the_reason():
    tracking = compare_tracking(recording(follows_command), recording(follows_command))
    swapped = ["elbow_flex", "shoulder_pan", "gripper"]
    ok, reasons = verdict(["/clock exists only on hw"], NAMES, swapped, tracking)
    assert not ok
    assert reasons[0] == "/clock exists only on hw"
    assert reasons[1].startswith("joint names differ: sim ['shoulder_pan', 'elbow_flex'")


def test_no_overlap_is_a_failure_not_a_crash():
    sim = recording(follows_command)
    sim.hold_time = sim.command_time - 1.0
    tracking = compare_tracking(sim, recording(follows_command))
    assert tracking["joints"] == {}
    ok, reasons = verdict([], NAMES, NAMES, tracking)
    assert not ok and "no common time window" in reasons[0]


def test_onset_is_none_without_motion():
    assert onset(recording(lambda t: np.zeros(3))) is None
