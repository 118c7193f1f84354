"""Scripted tasks on the simulated tabletop, judged from simulator state.

``Session`` bundles what a task needs (world, robot, kinematics, primitives); ``pick_and_place``
runs one seeded episode and says whether the block ended up in the bowl.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from lang2policy.control.kinematics import Kinematics
from lang2policy.control.primitives import MotionPrimitives
from lang2policy.errors import Lang2PolicyError
from lang2policy.robots.sim_robot import SimRobot
from lang2policy.scene.world import World

_SETTLE_SECONDS = 0.5


class Session:
    """A simulated robot ready for primitives: ``Session("so101").primitives.pick(...)``."""

    def __init__(self, robot: str = "so101", layout: str = "cap_tabletop") -> None:
        self.world = World(robot, layout)
        self.robot = SimRobot(self.world)
        self.robot.connect()
        self.kinematics = Kinematics(self.world.model, self.world.description, self.world.arm)
        self.primitives = MotionPrimitives(self.robot, self.kinematics, self.world)

    def record(self, camera: str, size: tuple[int, int] = (480, 360), fps: int = 20):
        """Start recording ``camera`` in simulated time; returns the VideoRecorder (``save``
        it, then ``renderer.close()``)."""
        from lang2policy.scene.render import CameraRenderer, VideoRecorder

        recorder = VideoRecorder(CameraRenderer(self.world.model, *size), camera, fps)
        self.robot.observers.append(lambda: recorder.maybe_capture(self.world.data))
        return recorder

    def reset(self, seed: int, objects: list[str] | None = None) -> list[str]:
        names = self.world.reset(seed, objects)
        self.robot.forget_last_command()
        self.primitives = MotionPrimitives(self.robot, self.kinematics, self.world)
        return names


@dataclass(frozen=True)
class EpisodeResult:
    seed: int
    block: str
    bowl: str
    success: bool
    error: str
    sim_seconds: float

    def as_dict(self) -> dict:
        return asdict(self)


def pick_and_place(session: Session, seed: int) -> EpisodeResult:
    """Reset with ``seed``, put a seeded choice of block into a seeded choice of bowl."""
    names = session.reset(seed)
    rng = np.random.default_rng(seed + 10_000)
    block = str(rng.choice([n for n in names if n.endswith("block")]))
    bowl = str(rng.choice([n for n in names if n.endswith("bowl")]))
    start, error = session.world.time, ""
    try:
        session.primitives.put_first_on_second(block, bowl)
        session.primitives.go_home()
    except Lang2PolicyError as exc:
        error = f"{type(exc).__name__}: {exc}"
    session.world.step_seconds(_SETTLE_SECONDS)
    success = session.world.is_in(block, bowl)
    return EpisodeResult(seed, block, bowl, success, error, session.world.time - start)
