"""An emulated SO-101 on a serial port: the servo bus over a pty, the arm and table in MuJoCo.

``lang2policy_so101_emulator`` is what a physical SO-101 on a table would be to the graph, for
running the real driver (``so101_driver_node``) with no arm: a ``ServoBusEmulator`` answers
the STS3215 byte protocol on a pseudo-terminal (symlinked at ``link``, the port to give the
driver), and its servos are the joints of the MuJoCo SO-101 (``MujocoPlant``) in the tabletop
scene with the objects of ``layout``/``seed``/``objects``, as the sim node builds it. Physics
runs in real time (a steady timer, and every bus request, advance it).

What a real arm does not have, it publishes for the graph's ground-truth perception: the
objects' poses on ``objects_topic`` (``/sim/objects``, visualization_msgs/MarkerArray, the sim
node's format), at ``objects_rate``, stamped with this node's clock (wall time, as the driver
stamps joint states). What a real table has, its cameras: ``/camera/<name>/image_raw`` and
``camera_info`` of the scene's cameras at ``camera_rate`` (rendered only while someone listens,
as the sim node's), so camera perception runs on the emulated arm as on a physical one.

Faults for testing the driver and the graph: ``drop_rate``, ``corrupt_rate`` (fractions of
replies), ``latency`` (s before each reply), ``silent`` (servo ids that never answer).

``realism`` (``off``, ``mild``, ``hard`` or a YAML file, ``config/realism/``): the servo part of
a realism profile makes the servos imperfect (deadband, backlash, position-loop lag, command
latency, reading noise, gripper slip), seeded by ``seed``; its scene part draws the light,
shades and camera error the cameras see, as in the sim node; ``off`` (the default) keeps both
ideal, exactly as without it.
"""

from __future__ import annotations

import copy
import os
import time
from pathlib import Path

from rclpy.clock import Clock, ClockType
from visualization_msgs.msg import MarkerArray

from lang2policy.errors import ConfigError
from lang2policy.robots.feetech.emulator import ServoBusEmulator
from lang2policy.robots.feetech.servo_realism import is_ideal
from lang2policy.robots.so101.calibration import Calibration
from lang2policy.robots.so101.mujoco_plant import MujocoPlant
from lang2policy.ros import convert
from lang2policy.ros.entry import entry_point
from lang2policy.ros.params import ReadOnlyParameters
from lang2policy.ros.sim_cameras import SimCameras
from lang2policy.ros.sim_node import world_object_poses
from lang2policy.scene.world import World

PHYSICS_PERIOD = 0.01  # s between physics catch-ups when the bus is quiet
MAX_CATCH_UP = 0.05  # s of physics per catch-up at most: a reply never waits long for the lock


def servo_ids(name: str, value: object) -> list[int]:
    """Servo ids from an int parameter (``-p silent:=3``) or a comma-separated string."""
    try:
        if isinstance(value, int) and not isinstance(value, bool):
            return [value]
        return [int(i) for i in str(value).split(",") if i.strip()]
    except ValueError:
        raise ConfigError(
            f"parameter '{name}' must be servo ids like 3 or '3,4', got {value!r}"
        ) from None


class SO101EmulatorNode(ReadOnlyParameters):
    """``lang2policy_so101_emulator`` (see the module docstring)."""

    executable = "so101_emulator_node"

    def __init__(self, **kwargs) -> None:
        super().__init__("lang2policy_so101_emulator", **kwargs)
        self.link = Path(self._param("link"))
        layout = self._param("layout")
        named = self._param("objects")
        seed = int(self._param("seed"))
        path = self._param("calibration")
        topic = self._param("objects_topic")
        rate = self._param("objects_rate")
        realism = self._realism()
        faults = {
            "drop_rate": self._param("drop_rate"),
            "corrupt_rate": self._param("corrupt_rate"),
            "latency_s": self._param("latency"),
        }
        silent = servo_ids("silent", self._param("silent"))

        camera_rate = self._param("camera_rate")
        width = int(self._param("camera_width"))
        height = int(self._param("camera_height"))

        self.seed = seed
        self.world = World(robot="so101", layout=layout, realism=realism)
        # before the bus answers: making the GL context holds the process for a moment
        self._cameras = self._start_cameras(camera_rate, width, height)
        names = [o.strip() for o in named.split(",") if o.strip()] or None
        self.objects = self.world.reset(seed, names)
        calibration = Calibration.load(path or None)
        self.plant = MujocoPlant(
            self.world, calibration, set_initial_pose=False, max_catch_up=MAX_CATCH_UP
        )
        self.emulator = ServoBusEmulator(
            calibration.servo_ids,
            plant=self.plant,
            positions=self.plant.present_ticks(),
            realism=realism.servo,
            realism_seed=seed,
        )
        self.emulator.set_faults(**faults)
        self.port = self.emulator.start()
        for servo_id in silent:
            self.emulator.silence(servo_id)
        self._link_port()
        self._objects_pub = self.create_publisher(MarkerArray, topic, 10)
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        self._physics = self.create_timer(PHYSICS_PERIOD, self._advance, clock=steady)
        self._publisher = self.create_timer(1.0 / rate, self._publish_objects, clock=steady)
        if self._cameras is not None:
            self.create_timer(1.0 / camera_rate, self._submit_frame, clock=steady)
        self.get_logger().info(
            f"emulated SO-101 on {self.link} -> {self.port}: servos {list(calibration.servo_ids)}"
            f", objects {self.objects} (layout '{layout}', seed {seed}); object poses on {topic}"
            + (f"; faults {faults}, silent {silent}" if any(faults.values()) or silent else "")
            + ("" if is_ideal(realism.servo) else f"; servo realism '{realism.name}'")
        )

    def _link_port(self) -> None:
        """Point ``link`` at the pty (replacing a stale link; never a real file)."""
        if self.link.is_symlink():
            self.link.unlink()
        elif self.link.exists():
            self.emulator.stop()
            raise ConfigError(f"link {self.link} exists and is not a symlink; choose another path")
        os.symlink(self.port, self.link)

    def _advance(self) -> None:
        self.emulator.plant.advance(time.monotonic())  # through the servos' imperfections

    def _publish_objects(self) -> None:
        with self.plant.lock:
            poses = world_object_poses(self.world)
        stamp = self.get_clock().now().nanoseconds * 1e-9
        self._objects_pub.publish(convert.object_markers(poses, stamp))

    def _start_cameras(self, rate: float, width: int, height: int) -> SimCameras | None:
        """The scene's cameras (None when ``rate`` is 0)."""
        if rate <= 0:
            return None
        names = [self.world.model.camera(i).name for i in range(self.world.model.ncam)]
        return SimCameras(self, names, width, height)

    def _submit_frame(self) -> None:
        """The table as it is now, for the cameras someone listens to."""
        self._cameras.offer(self._snapshot, self.get_clock().now().nanoseconds * 1e-9)

    def _snapshot(self):
        with self.plant.lock:  # physics steps in the bus thread too
            return copy.copy(self.world.data)

    def destroy_node(self) -> None:
        if self._cameras is not None:
            self._cameras.close()
        self.emulator.stop()
        if self.link.is_symlink() and os.readlink(self.link) == self.port:
            self.link.unlink()
        super().destroy_node()


main = entry_point(SO101EmulatorNode, "so101_emulator_node", "serve the emulated arm until Ctrl-C")


if __name__ == "__main__":
    raise SystemExit(main())
