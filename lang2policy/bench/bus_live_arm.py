"""``LiveArm``'s part played by the physical path: the SO-101 driver on an emulated servo bus,
objects from camera perception only (``session.bus_camera``), behind the same message boundary.

A thread at the driver node's rate reads the joints from the bus, hands them and the object
set camera perception reports to the planner's ``RemoteSession`` (as the graph's driver and
perception nodes do), and writes the latest command the session streamed to the bus. The
simulated world (``world``) only runs the physics, renders the camera and judges; the tool
point is logged at every physics catch-up for the judges (``trace``).
"""

from __future__ import annotations

import bisect
import threading
import time

import numpy as np

from lang2policy.session.bus_camera import BusCameraSession
from lang2policy.session.remote import RemoteSession

TICK = 0.02  # s between bus readouts and commands (the driver node's 50 Hz)


class BusLiveArm:
    """``bench.live_arm.LiveArm``'s interface over the physical path (module docstring)."""

    def __init__(self, bus: BusCameraSession, seed: int, objects) -> None:
        """``bus``: the session (colours calibrated) whose table is laid anew for this arm;
        one serves every episode of a run (its caller closes it)."""
        self.bus = bus
        self.bus.reset(seed, list(objects))
        self.world = self.bus.truth.world
        self._offset = np.array(self.world.description.grasp.center_offset, float)
        self.trace: list[tuple[float, np.ndarray]] = []
        self.bus.tick_observers.append(self._log_tool)
        self._command = None
        self._lock = threading.Lock()
        self.session = RemoteSession("so101", self._receive, stale_after=5.0)
        self._publish()
        self.session.robot.connect()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bus-live-arm", daemon=True)
        self._thread.start()

    def tool(self) -> np.ndarray:
        with self.bus.plant_lock:
            pose = self.world.ee_pose()
        return pose.position + pose.rotation() @ self._offset

    def _log_tool(self) -> None:
        self.trace.append((self.world.time, self.tool()))

    def _receive(self, action: np.ndarray) -> None:
        with self._lock:
            self._command = np.array(action)

    def _publish(self) -> None:
        """The driver's readout and perception's object set, as the graph's nodes send them."""
        obs = self.bus.robot.get_observation()
        self.session.update_state(obs.names, obs.position, obs.velocity, obs.time)
        self.session.update_objects(
            {name: (np.array(p), np.array(q)) for name, (p, q) in self.bus.perceived().items()}
        )

    def _run(self) -> None:
        next_tick = time.monotonic()
        while not self._stop.is_set():
            with self._lock:
                command = self._command
            if command is not None:
                self.bus.robot.send_action(command)
            self._publish()
            next_tick += TICK
            time.sleep(max(0.0, next_tick - time.monotonic()))

    def since(self, t0: float) -> np.ndarray:
        return np.array([p for t, p in list(self.trace) if t >= t0])

    def peak_speed(self, t0: float) -> float:
        """Peak tool speed (m/s) after ``t0``, each over the last 20 ms or more."""
        points = [(t, p) for t, p in list(self.trace) if t >= t0]
        times = [t for t, _ in points]
        speeds = []
        for t, p in points:
            j = bisect.bisect_right(times, t - 0.02) - 1
            if j >= 0:
                speeds.append(float(np.linalg.norm(p - points[j][1])) / (t - times[j]))
        return max(speeds, default=0.0)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.bus.tick_observers.remove(self._log_tool)
