"""A simulated arm behind a message boundary (no ROS), for benchmarks and tests: the robot node's
part played by a thread that steps a real ``World`` one physics step at a time, applies the
commands a ``RemoteSession`` streams, feeds back states and objects, and logs the tool point."""

from __future__ import annotations

import threading
import time

import numpy as np

from lang2policy.robots.sim_robot import SimRobot
from lang2policy.scene.world import World
from lang2policy.session.remote import RemoteSession

OBJECTS = ["red block", "blue block", "blue bowl", "green bowl"]
TICK = 0.02  # s of sim time per control tick, as the sim node's 50 Hz


class LiveArm:
    """A simulated arm behind a message boundary; the tool point is logged every physics step."""

    def __init__(self, pace: float = 0.004, seed: int = 1, objects=tuple(OBJECTS)) -> None:
        self.world = World("so101")
        self.world.reset(seed, list(objects))
        self.robot = SimRobot(self.world)
        self.robot.connect()
        offset = np.array(self.world.description.grasp.center_offset, float)
        self._offset = offset
        self.trace: list[tuple[float, np.ndarray]] = []
        self._command = None
        self._lock = threading.Lock()
        self._pace = pace  # wall seconds slept per tick: a few times faster than real time
        self.session = RemoteSession("so101", self._receive, stale_after=5.0)
        self._stop = threading.Event()
        self._publish()
        self.session.robot.connect()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def tool(self) -> np.ndarray:
        pose = self.world.ee_pose()
        return pose.position + pose.rotation() @ self._offset

    def _receive(self, action: np.ndarray) -> None:
        with self._lock:
            self._command = np.array(action)

    def _publish(self) -> None:
        obs = self.robot.get_observation()
        self.session.update_state(obs.names, obs.position, obs.velocity, obs.time)
        self.session.update_objects(
            {
                n: (self.world.object_pose(n).position, self.world.object_pose(n).quat)
                for n in self.world.object_names()
            }
        )

    def _run(self) -> None:
        steps = round(TICK / self.world.model.opt.timestep)
        while not self._stop.is_set():
            with self._lock:
                command = self._command
            if command is not None:
                self.robot.send_action(command)
            for _ in range(steps):
                self.world.step()
                self.trace.append((self.world.time, self.tool()))
            self._publish()
            time.sleep(self._pace)

    def since(self, t0: float) -> np.ndarray:
        return np.array([p for t, p in list(self.trace) if t >= t0])

    def peak_speed(self, t0: float) -> float:
        """Peak tool speed (m/s) after ``t0``, over 10-step (20 ms) windows."""
        points = [(t, p) for t, p in list(self.trace) if t >= t0]
        speeds = [
            np.linalg.norm(b[1] - a[1]) / (b[0] - a[0])
            for a, b in zip(points[:-10:10], points[10::10], strict=False)
        ]
        return max(speeds, default=0.0)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
