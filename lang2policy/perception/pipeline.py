"""Camera perception end to end: images, intrinsics and joint positions in, the object set out.

``CameraPerception`` holds what arrives separately on a robot (camera intrinsics, joint positions
for the robot mask) and turns each image into the current object set (``ObjectTracker``). It
is what the ROS node wraps, and can be driven directly (benchmarks, tests, notebooks).
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Mapping

import numpy as np

from lang2policy.errors import ConfigError
from lang2policy.perception.camera import CameraPose, Intrinsics, PinholeCamera
from lang2policy.perception.detector import Detector, DetectorSettings, ObjectGeometry
from lang2policy.perception.holding import HeldBlock, Surfaces
from lang2policy.perception.misread import keep_tracked_names
from lang2policy.perception.palette import Palette
from lang2policy.perception.records import PerceivedObject
from lang2policy.perception.robot_mask import RobotMask
from lang2policy.perception.scene import geometry_for_robot, scene_palette
from lang2policy.perception.stacking import restack
from lang2policy.perception.tracker import ObjectTracker, Update

_JOINT_HISTORY = 100  # joint states kept: 2 s at 50 Hz
HIDDEN_SHARE = 0.5  # of an object's outline behind the robot (or off the image): kept unseen
_RING_POINTS = 16  # points of the outline checked


class CameraPerception:
    """One fixed camera of ``robot``'s workspace at ``pose``; see the module docstring.

    ``robot_mask``: ignore the pixels the robot covers (needs ``set_joints``); turn it off
    only for a camera that never sees the arm.
    """

    def __init__(
        self,
        robot: str,
        pose: CameraPose,
        palette: Palette | None = None,
        geometry: ObjectGeometry | None = None,
        robot_mask: bool = True,
        dilate_px: int = 3,
        max_missed: int = 0,
        settings: DetectorSettings | None = None,
        confirm: int = 1,
    ) -> None:
        self.pose = pose
        self.palette = palette or scene_palette(robot)
        self.geometry = geometry or geometry_for_robot(robot)
        self.settings = settings
        self.mask = RobotMask(robot, dilate_px) if robot_mask else None
        self.tracker = ObjectTracker(max_missed, confirm)
        g = self.geometry
        self.holding = HeldBlock(Surfaces(g.table_z, g.block_half, g.bowl_base))
        self.detector: Detector | None = None
        self._joints: deque[tuple[float, dict[str, float]]] = deque(maxlen=_JOINT_HISTORY)
        self.seconds = 0.0  # processing time of the last frame

    def set_intrinsics(self, intrinsics: Intrinsics) -> bool:
        """Use these intrinsics from now on; True if they differ from the ones in use."""
        current = self.detector.camera.intrinsics if self.detector else None
        if current is not None and _same(current, intrinsics):
            return False
        camera = PinholeCamera(intrinsics, self.pose)
        self.detector = Detector(camera, self.geometry, self.palette, settings=self.settings)
        return True

    def set_joints(self, joints: Mapping[str, float], stamp: float = 0.0) -> None:
        """Joint positions (rad; ``gripper`` 0..1) measured at ``stamp`` (s), for the robot mask.

        A short history is kept: each image is masked with the positions nearest its own time,
        so the mask does not trail a moving arm.
        """
        self._joints.append((float(stamp), dict(joints)))

    def waiting_for(self) -> str:
        """What is still missing before an image can be processed ("" when nothing is)."""
        if self.detector is None:
            return "camera intrinsics (camera_info)"
        if self.mask is not None and not self._joints:
            return "joint positions (for the robot mask)"
        return ""

    def process(self, rgb: np.ndarray, stamp: float | None = None) -> Update:
        """Detect the objects in ``rgb`` (taken at ``stamp``; None: now) and update the object
        set; raises ConfigError when something is missing (``waiting_for``) or the image does
        not fit the intrinsics."""
        missing = self.waiting_for()
        if missing:
            raise ConfigError(f"cannot process an image yet: waiting for {missing}")
        start = time.perf_counter()
        ignore, joints = None, None
        if self.mask is not None:
            joints = self._joints_at(stamp)
            self.mask.pose(joints)
            ignore = self.mask.mask(self.detector.camera)
        detections = self._without_pieces_of_kept_bowls(self.detector.detect(rgb, ignore))
        detections = keep_tracked_names(detections, self.tracker.objects)
        camera = self.detector.camera.pose.position
        detections, under = restack(
            detections, self.tracker.objects, camera, self.geometry.block_half
        )
        if self.holding.name:  # in the jaws: kept, wherever the camera sees it
            under.add(self.holding.name)
        update = self.tracker.update(
            detections,
            lambda obj: obj.name in under or self._hidden(obj, ignore) or self._unclear(obj),
        )
        if self.mask is not None and joints is not None:
            held = self.holding.follow(self.mask.tool(joints), self.tracker.objects)
            if held is not None:
                self.tracker.place(held)
        self.seconds = time.perf_counter() - start
        return update

    def reset(self) -> None:
        """The table was reset: forget the objects kept unseen and the block in the jaws."""
        self.tracker.clear()
        self.holding.forget()

    def _without_pieces_of_kept_bowls(self, found: list[PerceivedObject]) -> list[PerceivedObject]:
        """``found`` less the blocks that are pieces of a bowl the arm hides: a new block of a
        kept bowl's colour within its rim (the detector's own rule, for a bowl it cannot fit
        this frame because the gripper cuts it apart)."""
        names = {obj.name for obj in found}
        kept = [obj for obj in self.tracker.objects if obj.kind == "bowl" and obj.name not in names]
        return [obj for obj in found if not _piece_of(obj, kept, self.tracker.objects)]

    def _hidden(self, obj: PerceivedObject, ignore: np.ndarray | None) -> bool:
        """Whether this frame cannot show ``obj`` where it was last seen: at least
        ``HIDDEN_SHARE`` of its outline (a ring at its size around its centre) falls on the
        robot's pixels or off the image. Such an object is kept, not missed."""
        ring = np.linspace(0.0, 2 * np.pi, _RING_POINTS, endpoint=False)
        radius = max(float(obj.size), 1e-3)
        x, y, z = obj.position
        points = np.column_stack(
            [x + radius * np.cos(ring), y + radius * np.sin(ring), np.full(_RING_POINTS, z)]
        )
        camera = self.detector.camera
        pixels = np.rint(camera.project(np.vstack([[x, y, z], points]))).astype(int)
        height, width = camera.intrinsics.height, camera.intrinsics.width
        inside = (pixels[:, 0] >= 0) & (pixels[:, 0] < width) & (pixels[:, 1] >= 0)
        inside &= pixels[:, 1] < height
        covered = ~inside
        if ignore is not None:
            covered[inside] = ignore[pixels[inside, 1], pixels[inside, 0]]
        return bool(covered.mean() >= HIDDEN_SHARE)

    def _unclear(self, obj: PerceivedObject) -> bool:
        """Whether ``obj`` stands where the detector saw a bowl it could not name (in two
        colours: ``bowl_wall``): not a view of the table, so kept, not missed."""
        x, y, rim = *obj.position[:2], self.geometry.bowl.half
        return any(math.hypot(x - ux, y - uy) < rim for ux, uy in self.detector.unclear)

    def _joints_at(self, stamp: float | None) -> dict[str, float]:
        if stamp is None:
            return self._joints[-1][1]
        return min(self._joints, key=lambda item: abs(item[0] - stamp))[1]

    @property
    def objects(self) -> list[PerceivedObject]:
        return self.tracker.objects


def _same(a: Intrinsics, b: Intrinsics) -> bool:
    return (a.width, a.height, a.distortion) == (
        b.width,
        b.height,
        b.distortion,
    ) and np.array_equal(a.k, b.k)


def _piece_of(obj: PerceivedObject, bowls: list[PerceivedObject], known) -> bool:
    """A block not yet in the set, of the colour of one of ``bowls`` and within its rim."""
    if obj.kind != "block" or any(o.name == obj.name for o in known):
        return False
    colour = obj.name.split(" ")[0]
    return any(
        bowl.name.split(" ")[0] == colour
        and np.hypot(obj.position[0] - bowl.position[0], obj.position[1] - bowl.position[1])
        < bowl.size
        for bowl in bowls
    )
