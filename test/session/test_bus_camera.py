"""The physical path with the real driver in it: the SO-101 driver on an emulated servo bus,
objects from camera perception only, judged by the simulator (``session.bus_camera``,
``bench pickplace|cap --robot so101-hw --emulate --perception camera``)."""

from __future__ import annotations

import argparse
import math

import pytest

from lang2policy.bench import camera_route, pickplace
from lang2policy.errors import Lang2PolicyError
from lang2policy.realism import load_realism
from lang2policy.robots.so101.backend import SO101Robot
from lang2policy.session.bus_camera import BusCameraSession


@pytest.fixture(scope="module")
def bus_session():
    bus = BusCameraSession("so101", realism=load_realism("mild"))
    bus.use_rig(0)
    yield bus
    bus.close()


def test_the_driver_on_the_emulated_bus_puts_a_camera_seen_block_in_a_bowl(bus_session):
    seen = bus_session.reset(0)
    truth = bus_session.truth.world
    assert isinstance(bus_session.robot, SO101Robot) and bus_session.robot.port.startswith("/dev/")
    assert set(seen) <= set(truth.present)
    for name in seen:  # the mirror's poses are the camera's, close to the truth
        error = math.dist(bus_session.world.object_pose(name).position[:2],
                          truth.object_pose(name).position[:2])  # fmt: skip
        assert error < 0.015, (name, error)
    block = next(n for n in seen if n.endswith("block"))
    bowl = next(n for n in seen if n.endswith("bowl"))
    requests = bus_session.emulator.stats.requests
    bus_session.sync()
    bus_session.primitives.put_first_on_second(block, bowl)
    bus_session.primitives.go_home()
    bus_session.settle(0.5)
    assert truth.is_in(block, bowl)  # the simulated block went where the camera said
    assert bus_session.emulator.stats.requests > requests + 100  # the arm moved by the bus
    measured = bus_session.robot.get_observation().position[:-1]
    assert max(abs(measured - truth.arm_qpos())) < 0.05  # the bus reads the simulated joints


def _args(**changes) -> argparse.Namespace:
    values = dict(robot="so101-hw", episodes=1, seed=0, perception="camera", realism="mild",
                  emulate=True, json=True)  # fmt: skip
    return argparse.Namespace(**{**values, **changes})


def test_the_physical_path_flags_are_checked_together():
    assert camera_route.emulated_bus(_args()) is True
    assert camera_route.description(_args()) == "so101"
    with pytest.raises(Lang2PolicyError, match="go together"):
        pickplace.run_args(_args(emulate=False))
    with pytest.raises(Lang2PolicyError, match="go together"):
        pickplace.run_args(_args(robot="so101"))
    with pytest.raises(Lang2PolicyError, match="needs --perception camera"):
        pickplace.run_args(_args(perception="ground_truth"))
    with pytest.raises(Lang2PolicyError, match="use --perception camera"):
        pickplace.run_args(_args(robot="so101", emulate=False, perception="ground_truth"))


def test_bench_cap_runs_the_reference_programs_through_the_bus_beside_ground_truth():
    from lang2policy.bench import cap

    args = _args(llm=None, episodes=1, families="pick_place", no_oracle=False, grounding="on")
    report = cap.run_args(args)
    assert report["tracks"] == ["oracle", "truth"]
    assert report["arm"] == "the SO-101 driver on an emulated servo bus"
    assert report["realism"]["name"] == "mild" and report["perception"] == "camera"
    (episode,) = report["episodes"]
    assert episode["truth"]["success"], episode["truth"]
    assert episode["oracle"]["success"], episode["oracle"]  # from the camera, by the bus
    assert "truth" in cap.format_text(report)


def test_a_code_plan_corrected_mid_motion_on_the_emulated_bus_reaches_the_new_bowl(bus_session):
    import functools

    from lang2policy.bench.code_corrections import SCENARIOS, emulated_arm, run_once

    arm = functools.partial(emulated_arm, bus=bus_session)
    row = run_once(SCENARIOS["target"], 2, True, arm)  # "no, the green bowl"
    assert row["accepted"] and row["success"], row  # judged in the simulator
    assert bus_session.tick_observers == []  # the arm let go of the session it borrowed


# Physics and the bus run in wall time and the MPC plans in its own process, as on the robot:
# a loaded machine slows its planning, not the world. Alone it passes (51 s); late in one
# fresh-clone CI run the corrected plan timed out at 8.2 s of hover, so a failure is run again.
@pytest.mark.flaky(reruns=2)
def test_a_reward_plan_corrected_on_the_emulated_bus_hovers_over_the_true_block(
    bus_session, tmp_path
):
    """The real-time MPC drives the driver over the bus from camera-seen objects; the plan
    hovers 3 cm off (a biased point), the person says which way, and the true tool ends
    over the true block."""
    from lang2policy.bench.corrections_bus import BusRoute
    from lang2policy.bench.corrections_runs import run_episode
    from lang2policy.corrections.memory import Embedder
    from lang2policy.mpc.sampler import MPCConfig

    row = run_episode(
        BusRoute(bus_session), "offset", 0, MPCConfig(samples=32, seed=0),
        tmp_path / "memory.jsonl", Embedder(), 0.8,
    )  # fmt: skip
    without, corrected = row["without"], row["with"]
    assert not without["success"] and without["measure"] > 0.02, without  # judged on truth
    assert corrected["success"] and corrected["corrections"] == 1, corrected
    assert corrected["measure"] < 0.015, corrected
    assert bus_session.emulator.stats.requests > 0  # the arm was driven over the bus


def test_bench_corrections_takes_the_physical_path_for_reward_and_code_plans():
    from lang2policy.bench import corrections

    args = _args(plans="reward,code", scenarios=None, samples=8, threshold=0.8, memory_dir=None)
    with pytest.raises(Lang2PolicyError, match="add --robot so101-hw --emulate"):
        corrections.run_args(_args(**{**vars(args), "robot": "so101", "emulate": False}))
    with pytest.raises(Lang2PolicyError, match="takes reward, code or both"):
        corrections.run_args(_args(**{**vars(args), "plans": "vla"}))
