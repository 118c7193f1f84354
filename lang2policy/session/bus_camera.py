"""The physical path in-process: the real SO-101 driver on an emulated servo bus, camera only.

``BusCameraSession`` is ``CameraSession`` with its arm swapped for the one a user's SO-101
would be: ``robots.so101.SO101Robot`` (the driver code the graph's ``so101_driver_node`` runs)
talks the STS3215 byte protocol over a pty to ``ServoBusEmulator``, whose servos are the
simulated SO-101's joints (``MujocoPlant``) with the realism profile's servo imperfections
(deadband, backlash, lag, latency, reading noise, slip). Nothing in the decision path reads the
simulator: the joints come from the bus, the objects from camera perception; the simulated
world only renders the camera and judges success.

Time is wall time, as on the robot: a clock thread advances the physics every
``PHYSICS_PERIOD`` s (as the emulator node's steady timer) and renders and perceives a frame
every ``FRAME_PERIOD`` s of the world's time. Each ``reset`` builds the bus afresh on the new
layout (a real user would re-seat the objects with the arm at rest).
"""

from __future__ import annotations

import contextlib
import copy
import os
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from lang2policy.robots.feetech.emulator import ServoBusEmulator
from lang2policy.robots.so101.backend import SO101Robot
from lang2policy.robots.so101.calibration import Calibration
from lang2policy.robots.so101.mujoco_plant import MujocoPlant
from lang2policy.scene.render import CameraRenderer
from lang2policy.session.camera import FRAME_PERIOD, SETTLE_FRAMES, CameraSession

T = TypeVar("T")
PHYSICS_PERIOD = 0.01  # s between physics catch-ups (the emulator node's timer)
MAX_CATCH_UP = 0.05  # s of physics per catch-up at most (the emulator node's bound)
_TICKS = os.sysconf("SC_CLK_TCK")
FRAME_WAIT = 5.0  # s of wall time a settle waits for its frames before it says so


class BusTimeout(RuntimeError):
    """The emulated bus stopped producing frames (the clock thread is stuck or dead)."""


class BusCameraSession(CameraSession):
    """``CameraSession`` over the SO-101 driver and an emulated servo bus (module docstring)."""

    def __init__(self, robot: str = "so101", realism=None, **kwargs) -> None:
        if robot != "so101":
            raise ValueError(f"the emulated servo bus is an SO-101's; got robot {robot!r}")
        super().__init__(robot, realism=realism, **kwargs)
        self.truth.robot.observers.remove(self._observe)  # frames come from the clock thread
        self.calibration = Calibration.load()
        self._servo_realism = realism.servo if realism is not None else None
        self._bus: ServoBusEmulator | None = None
        self._plant: MujocoPlant | None = None
        self._clock: threading.Thread | None = None
        self._running = threading.Event()
        self._perceived = threading.Lock()
        self._frames = 0
        self._failure: BaseException | None = None
        # called from the clock thread after each physics catch-up (hold ``plant_lock``)
        self.tick_observers: list[Callable[[], None]] = []
        self._frame_seen = threading.Condition()

    # ------------------------------------------------------------------ the bus
    @property
    def emulator(self) -> ServoBusEmulator | None:
        """The emulated servo bus of the current layout (None between layouts)."""
        return self._bus

    def _start_bus(self, seed: int) -> None:
        """The emulated servos on the world as it is, the driver connected, the clock running."""
        self._plant = MujocoPlant(
            self.truth.world, self.calibration, set_initial_pose=False, max_catch_up=MAX_CATCH_UP
        )
        self._bus = ServoBusEmulator(
            self.calibration.servo_ids,
            plant=self._plant,
            positions=self._plant.present_ticks(),
            realism=self._servo_realism,
            realism_seed=seed,
        )
        port = self._bus.start()
        self.robot = SO101Robot(port, self.calibration)
        self.robot.connect()
        self._running.set()
        self._clock = threading.Thread(target=self._tick, name="bus-camera-clock", daemon=True)
        self._clock.start()

    @property
    def plant_lock(self):
        """The lock the emulated bus and the clock thread step the simulated world under."""
        return self._plant.lock

    def truth_lock(self):
        """Hold while reading the simulated world from another thread (physics steps in the
        bus's and the clock's threads)."""
        return self._plant.lock if self._plant is not None else contextlib.nullcontext()

    def background_cpu(self) -> float:
        """CPU seconds the emulated arm's threads (the bus, the physics clock and camera) have
        used so far: in the graph they are other processes, so a plan's compute clock takes
        them off what it charges the plan (``SandboxRunner``). Compare within one call only
        (a new layout starts new threads)."""
        threads = [self._clock, self._bus._thread if self._bus is not None else None]
        return sum(_thread_cpu(t.native_id) for t in threads if t is not None and t.native_id)

    def _stop_bus(self) -> None:
        self._running.clear()
        if self._clock is not None:
            self._clock.join(timeout=5.0)
            self._clock = None
        if self._bus is not None:
            if self.robot.is_connected:
                self.robot.disconnect()
            self._bus.stop()
            self._bus = None
            self._plant.restore_actuators()
            self._plant = None

    def _tick(self) -> None:
        """The clock thread: physics in step with wall time, a camera frame every period. It
        renders with its own renderer (a GL context is current in one thread only)."""
        size = self._intrinsics.width, self._intrinsics.height
        renderer = CameraRenderer(self.truth.world.model, *size)
        try:
            while self._running.is_set():
                started = time.monotonic()
                self._plant.advance(started)
                for observer in self.tick_observers:
                    observer()
                if self.truth.world.data.time + 1e-9 >= self._next_frame:
                    self._next_frame = self.truth.world.data.time + FRAME_PERIOD
                    self._perceive_with(renderer)
                    with self._frame_seen:
                        self._frames += 1
                        self._frame_seen.notify_all()
                time.sleep(max(0.0, PHYSICS_PERIOD - (time.monotonic() - started)))
        except BaseException as exc:  # said by the next wait, not lost with the thread
            self._failure = exc
            raise
        finally:
            renderer.close()

    # ------------------------------------------------------------------ perception
    def _perceive_with(self, renderer: CameraRenderer) -> None:
        """One frame of the table as it is now: the physics copied under the plant's lock and
        rendered outside it (the bus must answer within its timeout); perception masks the
        arm at the joints the driver last read, as the graph's perception node does."""
        with self._plant.lock:
            snapshot = copy.copy(self.truth.world.data)
        rgb = self.sensor(renderer.render(snapshot, self.camera))
        with self._perceived:
            joints = self._measured_joints()
            if joints is not None:
                self.perception.set_joints(joints, snapshot.time)
            self.perception.process(rgb, snapshot.time)

    def _measured_joints(self) -> dict[str, float] | None:
        """The driver's last readout in action units (None before the first)."""
        states = dict(self.robot.servo_states)
        if not states:
            return None
        position = self.calibration.ticks_to_action({i: s.position for i, s in states.items()})
        return dict(zip(self.robot.limits.names, position, strict=True))

    def perceived(self) -> dict[str, tuple[tuple[float, ...], tuple[float, ...]]]:
        with self._perceived:
            return super().perceived()

    def _wait_frames(self, count: int) -> None:
        """Until the clock thread has perceived ``count`` more frames."""
        with self._frame_seen:
            goal = self._frames + count
            if not self._frame_seen.wait_for(lambda: self._frames >= goal, FRAME_WAIT):
                if self._failure is not None:
                    raise BusTimeout(f"the emulated arm's clock failed: {self._failure}")
                raise BusTimeout(f"no camera frame from the emulated arm in {FRAME_WAIT} s")

    # ------------------------------------------------------------------ Session
    def calibrate(self, number: int = 0):
        """As ``CameraSession.calibrate``, with the bus down (it re-lays the table)."""
        self._stop_bus()
        return super().calibrate(number)

    def lay_table(self, seed: int, objects: list[str] | None) -> None:
        """The table laid out anew with the arm at rest, the bus and driver built on it."""
        self.lay_scene(lambda truth: truth.reset(seed, objects))

    def lay_scene(self, setup: Callable[[object], T]) -> T:
        """``setup(truth)`` lays the table on the simulated session (its seed, objects, look,
        the arm's start) with the bus down; then the bus and driver are built on it. Returns
        what ``setup`` returned."""
        self._stop_bus()
        result = setup(self.truth)
        with self._perceived:
            self.perception = self._new_perception()
        self._frame, self._next_frame = 0, self.truth.world.data.time
        self._start_bus(self.truth.world.seed or 0)
        self.settle_frames()
        return result

    def settle_frames(self) -> None:
        """Until the clock thread has perceived ``SETTLE_FRAMES`` more frames."""
        self._wait_frames(SETTLE_FRAMES)

    def settle(self, seconds: float) -> None:
        """Let ``seconds`` pass (the world runs on the clock thread, in wall time)."""
        time.sleep(seconds)

    def close(self) -> None:
        self._stop_bus()
        super().close()


def _thread_cpu(native_id: int) -> float:
    """A thread of this process's CPU seconds (user + system; 0 once it has ended)."""
    try:
        with open(f"/proc/self/task/{native_id}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS
