"""The simulated arm as a session: world, robot, kinematics and motion primitives in-process.

``SimSession`` implements ``lang2policy.session.protocol.Session`` over MuJoCo physics; the
remote session (``lang2policy.session.remote``) implements it over an arm in the ROS graph.
"""

from __future__ import annotations

from collections.abc import Callable

from lang2policy.control.kinematics import Kinematics
from lang2policy.control.primitives import MotionPrimitives
from lang2policy.robots.sim_robot import SimRobot
from lang2policy.scene.world import World


class SimSession:
    """A simulated robot ready for primitives: ``SimSession("so101").primitives.pick(...)``."""

    def __init__(self, robot: str = "so101", layout: str = "cap_tabletop", realism=None) -> None:
        """``realism``: a ``realism.RealismProfile`` for the world's looks (None: as modelled)."""
        self.world = World(robot, layout, realism=realism)
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

    def sync(self) -> None:
        """Nothing to do: the simulated world is the truth (``Session.sync``)."""

    def observe(self, expected: list[str], say: Callable[[str], None] | None = None) -> None:
        """Nothing to do: the truth hides nothing (``Session.observe``)."""

    def reset(self, seed: int, objects: list[str] | None = None) -> list[str]:
        names = self.world.reset(seed, objects)
        self.robot.forget_last_command()
        self.reset_primitives()
        return names

    def reset_primitives(self) -> None:
        """Fresh motion primitives (after the world's state was set from outside)."""
        self.primitives = MotionPrimitives(self.robot, self.kinematics, self.world)
