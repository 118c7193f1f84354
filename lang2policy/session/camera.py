"""A simulated arm that knows the table only through its camera: the physical path in-process.

``CameraSession`` has the shape of ``SimSession`` (``world``, ``robot``, ``kinematics``,
``primitives``, ``reset``, ``sync``), but its ``world`` is a ``MirrorWorld`` that holds what
camera perception (``perception.CameraPerception``) reports, not where the objects are. The
simulated world (``truth``, with its realism profile) only renders the camera's frames (with
the profile's sensor effects) and judges success. Frames are perceived every
``FRAME_PERIOD`` s of simulated time while the arm moves (the tracker follows the arm through
the view) and ``SETTLE_FRAMES`` at rest after a reset, the arm raised out of the view;
``sync`` sets the mirror to the latest object set and the arm's measured joints before each
skill, as the graph's planner does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import numpy as np

from lang2policy.control.kinematics import Kinematics
from lang2policy.control.primitives import MotionPrimitives
from lang2policy.perception.camera_pose import sim_camera_pose
from lang2policy.perception.color_calibration import CalibrationFrame, ColorFit, fit_palette
from lang2policy.perception.pipeline import CameraPerception
from lang2policy.perception.scene import scene_palette, sim_intrinsics
from lang2policy.realism.image_effects import apply_image_effects
from lang2policy.scene.mirror import MirrorWorld
from lang2policy.scene.objects import COLORS
from lang2policy.scene.render import CameraRenderer
from lang2policy.session.sim import SimSession

FRAME_PERIOD = 0.1  # s of simulated time between perceived frames (a 10 Hz camera)
SETTLE_FRAMES = 4  # frames perceived at rest after a reset (a new name needs 3)
# The colour calibration a user would run (``lang2policy calibrate colors``): every colour as
# a block, then as a bowl, in this many frames per kind (bowls are larger: fewer per frame).
CALIBRATION_FRAMES = {"block": 2, "bowl": 4}
CALIBRATION_SEED = 900_000  # calibration layouts: seeds apart from any measured layout
CALIBRATION_TRIES = 20  # layouts tried per frame until the calibration sees every object


class CameraSession:
    """``SimSession``'s shape over camera perception (see the module docstring)."""

    def __init__(
        self,
        robot: str = "so101",
        realism=None,
        camera: str = "top",
        size: int = 224,
        palette=None,
        rig: int | None = None,
    ) -> None:
        self.truth = SimSession(robot, realism=realism)
        self.truth.world.rig = rig
        self.robot_name, self.camera = robot, camera
        self.world = MirrorWorld(robot)
        self.robot = self.truth.robot
        description = self.world.description
        self.kinematics = Kinematics(self.world.model, description, self.world.arm)
        self.primitives = MotionPrimitives(self.robot, self.kinematics, self.world)
        self.palette = palette or scene_palette(robot)
        self._pose = sim_camera_pose(robot, camera)
        self._intrinsics = sim_intrinsics(robot, camera, size, size)
        self._renderer = CameraRenderer(self.truth.world.model, size, size)
        self.perception = self._new_perception()
        self._next_frame = 0.0
        self._frame = 0
        self.robot.observers.append(self._observe)

    def close(self) -> None:
        self._renderer.close()

    def _new_perception(self) -> CameraPerception:
        perception = CameraPerception(
            self.robot_name, self._pose, palette=self.palette, max_missed=3, confirm=3
        )
        perception.set_intrinsics(self._intrinsics)
        return perception

    # ------------------------------------------------------------------ perception
    def calibrate(self, number: int = 0) -> ColorFit:
        """Fit the palette as a user would before working (``color_calibration``): frames of
        every colour as blocks and as bowls on the table, each layout retried until the fit
        sees all of its objects (as a user moves what the tool missed into view).
        ``number`` picks other calibration layouts (and so other lights)."""
        colors, frames = sorted(COLORS), []
        base = scene_palette(self.robot_name)
        for kind, count in CALIBRATION_FRAMES.items():
            for index in range(count):
                chosen = tuple(colors[index::count])
                seed = CALIBRATION_SEED + 1000 * number + 100 * len(frames)
                frames.append(self._calibration_frame(seed, chosen, kind, base))
        fit = fit_palette(frames, base)
        self.palette = fit.palette
        self.perception = self._new_perception()
        return fit

    def use_rig(self, rig: int) -> ColorFit:
        """Another user's objects and table (the realism profile's ``rig``), colours calibrated
        on them before any episode, as that user would run ``lang2policy calibrate colors``."""
        self.truth.world.rig = rig
        return self.calibrate(rig)

    def _calibration_frame(self, seed: int, colors, kind: str, base) -> CalibrationFrame:
        for attempt in range(CALIBRATION_TRIES):
            self.truth.reset(seed + attempt, [f"{c} {kind}" for c in colors])
            rgb = self.frame()
            self.perception.mask.pose(self._joints())
            ignore = self.perception.mask.mask(self.perception.detector.camera)
            frame = CalibrationFrame(rgb, tuple(f"{c} {kind}" for c in colors), ignore)
            if not fit_palette([frame], base).missed:
                break
        return frame

    def frame(self) -> np.ndarray:
        """The camera's frame as the sensor records it (the joints go to perception)."""
        world = self.truth.world
        rgb = self.sensor(self._renderer.render(world.data, self.camera))
        self.perception.set_joints(self._joints(), world.data.time)
        return rgb

    def sensor(self, rgb: np.ndarray) -> np.ndarray:
        """A rendered image as the camera records it: the look's noise, blur and exposure."""
        world = self.truth.world
        if world.look is not None:
            rng = np.random.default_rng([world.seed or 0, self._frame, 7])
            rgb = apply_image_effects(rgb, world.look.image, rng)
        self._frame += 1
        return rgb

    def _joints(self) -> dict[str, float]:
        world = self.truth.world
        positions = [*world.arm_qpos(), world.gripper_opening()]
        return dict(zip(world.arm.action_names, positions, strict=True))

    def perceive(self) -> None:
        """One camera frame of the simulated world through camera perception."""
        self.perception.process(self.frame(), self.truth.world.data.time)

    def _observe(self) -> None:
        if self.truth.world.data.time + 1e-9 >= self._next_frame:
            self._next_frame = self.truth.world.data.time + FRAME_PERIOD
            self.perceive()

    def truth_lock(self):
        """A context to read the simulated world in (nothing here: one thread steps it)."""
        return contextlib.nullcontext()

    def perceived(self) -> dict[str, tuple[tuple[float, ...], tuple[float, ...]]]:
        """The object set as perception reports it: name -> (position, quat w-x-y-z)."""
        return {o.name: (tuple(o.position), tuple(o.quat)) for o in self.perception.objects}

    # ------------------------------------------------------------------ Session
    def sync(self) -> None:
        """The mirror set to the perceived objects and the arm's measured joints."""
        state = self.robot.get_observation()
        held = self.primitives.held_in_hand()  # the camera cannot see it in the jaws
        self.world.sync(state.position[:-1], state.position[-1], self.perceived(), held)

    def observe(self, expected: list[str], say: Callable[[str], None] | None = None) -> None:
        """The scene as the camera sees it with the arm raised out of the view: a block the
        hovering gripper hid is back in the object set (``Session.observe``)."""
        self.primitives.go_look()
        self.settle_frames()
        self.sync()

    def reset(self, seed: int, objects: list[str] | None = None) -> list[str]:
        """A new layout on the simulated table; the arm then rises out of the camera's view
        (``observe``: at home the SO-101 hovers over the middle of the table and hides what
        lies under it), as a user clears the view before the table is listed. Returns the
        names camera perception sees then (not the names the simulator placed)."""
        self.lay_table(seed, objects)
        self.reset_primitives()  # nothing held on a new table
        self.sync()
        self.observe([])
        return self.world.object_names()

    def lay_table(self, seed: int, objects: list[str] | None) -> None:
        """The simulated table laid out anew, perception starting afresh on it."""
        self.truth.reset(seed, objects)
        self.perception = self._new_perception()
        self._frame, self._next_frame = 0, self.truth.world.data.time
        self.settle_frames()

    def settle_frames(self) -> None:
        """``SETTLE_FRAMES`` frames perceived at rest (a new name needs 3)."""
        for _ in range(SETTLE_FRAMES):
            self.perceive()

    def reset_primitives(self) -> None:
        self.primitives = MotionPrimitives(self.robot, self.kinematics, self.world)
