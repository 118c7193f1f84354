"""Where the gripper's geometry goes along a motion: points for the policy's keep-out zones.

The privilege policy judges a motion by points computed before it runs (``PolicyRequest``:
the tool centre point's path and a ``sweep`` of further points). The tool centre point alone
misses the jaws: on the SO-101 an open moving jaw reaches 8 cm past it. ``GripperHull`` bounds
the gripper -- the body carrying the ee site and every body below it (SO-101: ``gripper`` and
the moving jaw; Panda: ``link7`` with the hand, and the fingers) -- by one box per body in the
ee site's frame, tight around the body's geometry (mesh vertices; primitive geoms by their
bounding boxes) over every jaw opening the motion can have. Then:

- ``along_joints``: for a joint-space move, the boxes' corners at configurations sampled along
  the straight joint path (forward kinematics on a private ``MjData``), densely enough that no
  corner moves more than ``PATH_STEP`` between two samples;
- ``around_tool``: for compound motions, whose orientation is decided while they run, per tool
  centre point the world box holding the gripper boxes at every orientation the primitives
  use there (any yaw; leaning radially by any tilt between the configured extremes).

Box corners, not every vertex: a box's extreme point along any axis is a corner, so a zone
face the gripper crosses is seen exactly; and a few corners per sample keep the policy check
to a few milliseconds.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Sequence

import mujoco
import numpy as np

from lang2policy.control.kinematics import Kinematics

PATH_STEP = 0.01  # metres a hull corner may move between two samples of a joint path
_FIRST_SAMPLES = 5  # samples of a joint path before refining to PATH_STEP
_MAX_SAMPLES = 400  # a bound on refinement (a 4 m corner travel at PATH_STEP)
_JAW_SAMPLES = 16  # jaw openings sampled over an interval (the jaw swings; boxes cover it)
_OPENING_GRID = 0.05  # opening intervals are widened to this grid (and cached)
_YAW_SAMPLES = 72  # gripper yaws (5 degrees apart) for the compound-motion bound
_TILT_STEP = 0.05  # rad between tilts sampled for the compound-motion bound
_ANGLES = 720  # directions (0.5 degree apart) of the horizontal support function
_CUBE = np.array([[i, j, k] for i in (0, 1) for j in (0, 1) for k in (0, 1)], float)


def subtree(model: mujoco.MjModel, root: int) -> list[int]:
    """``root`` and every body below it in the kinematic tree."""
    bodies = []
    for body in range(model.nbody):
        b = body
        while b != 0 and b != root:
            b = int(model.body_parentid[b])
        if b == root:
            bodies.append(body)
    return bodies


def box_corners(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The 8 corners of each box (lo, hi: (B, 3)) as one (8B, 3) array."""
    lo, hi = np.atleast_2d(lo), np.atleast_2d(hi)
    return (lo[:, None, :] + (hi - lo)[:, None, :] * _CUBE[None]).reshape(-1, 3)


_HULLS: weakref.WeakKeyDictionary[Kinematics, GripperHull] = weakref.WeakKeyDictionary()


def hull_for(kin: Kinematics) -> GripperHull:
    """The hull of ``kin``'s gripper, shared by everything planning with ``kin``: its boxes
    are measured once per jaw interval (a fraction of a second each), not once per backend
    (the check on a copy makes a backend per program)."""
    hull = _HULLS.get(kin)
    if hull is None:
        hull = _HULLS[kin] = GripperHull(kin)
    return hull


class GripperHull:
    """Conservative boxes around the gripper, and the points they sweep along a motion."""

    def __init__(self, kin: Kinematics) -> None:
        self.kin = kin
        self.model, self.arm = kin.model, kin.arm
        self.data = mujoco.MjData(self.model)  # private: planning never touches the sim
        self.bodies = subtree(self.model, int(self.model.site_bodyid[self.arm.ee_site_id]))
        self._geoms = [
            g for g in range(self.model.ngeom) if self.model.geom_bodyid[g] in self.bodies
        ]
        self._boxes: dict[tuple[float, float], tuple[np.ndarray, np.ndarray]] = {}
        self._bounds: dict[tuple, tuple[np.ndarray, float, float]] = {}

    # ------------------------------------------------------------ the boxes
    def boxes(self, openings: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
        """(lo, hi), each (bodies, 3): per gripper body, the box in the ee site's frame holding
        its geometry at every jaw opening in ``openings`` (normalised: 0 closed, 1 open)."""
        lo = math.floor(min(openings) / _OPENING_GRID) * _OPENING_GRID
        hi = math.ceil(max(openings) / _OPENING_GRID) * _OPENING_GRID
        key = (round(max(lo, 0.0), 3), round(min(max(hi, lo), 1.0), 3))
        if key not in self._boxes:
            self._boxes[key] = self._measure_boxes(*key)
        return self._boxes[key]

    def _measure_boxes(self, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
        m, d, arm = self.model, self.data, self.arm
        low = np.full((len(self.bodies), 3), np.inf)
        high = np.full((len(self.bodies), 3), -np.inf)
        d.qpos[:] = m.qpos0
        d.qpos[arm.qpos_adr] = arm.home
        for opening in np.linspace(lo, hi, _JAW_SAMPLES if hi > lo else 1):
            d.qpos[arm.gripper_qpos_adr] = self._jaw_qpos(opening)
            mujoco.mj_kinematics(m, d)
            origin = d.site_xpos[arm.ee_site_id]
            rotation = d.site_xmat[arm.ee_site_id].reshape(3, 3)
            for i, body in enumerate(self.bodies):
                points = self._body_points(body)
                if len(points):
                    local = (points - origin) @ rotation
                    low[i] = np.minimum(low[i], local.min(axis=0))
                    high[i] = np.maximum(high[i], local.max(axis=0))
        keep = np.isfinite(low).all(axis=1)  # bodies without geometry add nothing
        return low[keep], high[keep]

    def _jaw_qpos(self, opening: float) -> np.ndarray:
        """Gripper joint positions at a normalised opening (position servos: ctrl = qpos),
        within the joints' ranges."""
        m, arm = self.model, self.arm
        value = arm.gripper_ctrl(float(opening))
        joints = [j for j in range(m.njnt) if m.jnt_qposadr[j] in set(arm.gripper_qpos_adr)]
        limits = m.jnt_range[joints]
        limited = m.jnt_limited[joints].astype(bool)
        return np.where(limited, np.clip(value, limits[:, 0], limits[:, 1]), value)

    def _body_points(self, body: int) -> np.ndarray:
        """World points bounding a body's geoms in ``self.data``: mesh vertices, and the
        corners of every other geom's bounding box."""
        m, d = self.model, self.data
        found = []
        for g in self._geoms:
            if m.geom_bodyid[g] != body:
                continue
            if m.geom_type[g] == mujoco.mjtGeom.mjGEOM_MESH:
                mesh = m.geom_dataid[g]
                start = m.mesh_vertadr[mesh]
                local = m.mesh_vert[start : start + m.mesh_vertnum[mesh]]
            else:
                centre, half = m.geom_aabb[g, :3], m.geom_aabb[g, 3:]
                local = box_corners(centre - half, centre + half)
            found.append(local @ d.geom_xmat[g].reshape(3, 3).T + d.geom_xpos[g])
        return np.vstack(found) if found else np.empty((0, 3))

    def corners(self, openings: tuple[float, float], held: float = 0.0) -> np.ndarray:
        """Corners of the gripper boxes (ee site frame), plus a cube of half-size ``held``
        around the tool centre point for a held object."""
        lo, hi = self.boxes(openings)
        if held > 0.0:
            centre = self.kin.center_offset
            lo = np.vstack([lo, centre - held])
            hi = np.vstack([hi, centre + held])
        return box_corners(lo, hi)

    # ------------------------------------------------------------ joint-space moves
    def along_joints(self, q_from, q_to, corners: np.ndarray) -> np.ndarray:
        """World points of ``corners`` (ee site frame) at configurations along the straight
        joint path from ``q_from`` to ``q_to``, sampled so that no corner moves more than
        ``PATH_STEP`` between two samples (the motion follows this path; see
        ``MotionPrimitives._follow``)."""
        q_from, q_to = np.asarray(q_from, float), np.asarray(q_to, float)
        count = _FIRST_SAMPLES
        while True:
            steps = np.linspace(0.0, 1.0, count)[:, None]
            points = self._at(q_from + (q_to - q_from) * steps, corners)
            moved = float(np.linalg.norm(np.diff(points, axis=0), axis=2).max(initial=0.0))
            if moved <= PATH_STEP or count >= _MAX_SAMPLES:
                return points.reshape(-1, 3)
            count = min(_MAX_SAMPLES, math.ceil((count - 1) * moved / PATH_STEP) + 2)

    def points_at(self, configurations: np.ndarray, corners: np.ndarray) -> np.ndarray:
        """(configurations, corners, 3): ``corners`` (ee site frame) in the world at each
        row of arm joints (the safety node's zone guard checks its samples with it)."""
        return self._at(np.atleast_2d(np.asarray(configurations, float)), corners)

    def at(self, q, corners: np.ndarray) -> np.ndarray:
        """World points of ``corners`` (ee site frame) with the arm at joints ``q``."""
        return self._at(np.asarray(q, float)[None], corners)[0]

    def _at(self, configurations: np.ndarray, corners: np.ndarray) -> np.ndarray:
        """(configurations, corners, 3): ``corners`` (ee site frame) in the world at each
        arm configuration (forward kinematics on the private ``MjData``)."""
        m, d, arm = self.model, self.data, self.arm
        out = np.empty((len(configurations), len(corners), 3))
        for i, q in enumerate(configurations):
            d.qpos[arm.qpos_adr] = q
            mujoco.mj_kinematics(m, d)
            rotation = d.site_xmat[arm.ee_site_id].reshape(3, 3)
            out[i] = corners @ rotation.T + d.site_xpos[arm.ee_site_id]
        return out

    # ------------------------------------------------------------ compound motions
    def around_tool(
        self, tool: Sequence[np.ndarray], corners: np.ndarray, tilts: Sequence[float]
    ) -> np.ndarray:
        """For each tool centre point, the 8 corners of a world box holding ``corners``
        (ee site frame) at every orientation the primitives may give the gripper there: any
        yaw, leaning radially by any tilt in [min(tilts), max(tilts)] (see
        ``Kinematics.tool_rotation``)."""
        tool = np.asarray(tool, float).reshape(-1, 3)
        if not len(tool):
            return np.empty((0, 3))
        support, z_low, z_high = self._support(corners, (min(tilts), max(tilts)))
        phi = np.arctan2(tool[:, 1], tool[:, 0])
        step = 2.0 * math.pi / _ANGLES

        def h(theta: np.ndarray) -> np.ndarray:
            return support[np.round(theta / step).astype(int) % _ANGLES]

        lo = tool + np.column_stack(
            [-h(math.pi - phi), -h(-math.pi / 2 - phi), np.full(len(tool), z_low)]
        )
        hi = tool + np.column_stack([h(-phi), h(math.pi / 2 - phi), np.full(len(tool), z_high)])
        return box_corners(lo, hi)

    def _support(
        self, corners: np.ndarray, tilt_range: tuple[float, float]
    ) -> tuple[np.ndarray, float, float]:
        """(support, z_low, z_high) of the gripper around the tool centre point at a tool point
        on the +x axis, over every yaw and tilt: ``support[k]`` bounds the horizontal extent
        along direction k * 0.5 degree, z_low/z_high the vertical extent.

        Exact in yaw: turning the gripper about the vertical moves each corner on a circle
        (radius rho, height z, in the top-down pose); leaning by a tilt rotates that circle
        about the horizontal axis square to the radial direction, and the extent of a tilted
        circle along u is centre.u + rho * sqrt(1 - (u.n)^2) for its normal n. Tilts are
        sampled; the margins cover the sampling steps."""
        key = (corners.tobytes(), round(tilt_range[0], 4), round(tilt_range[1], 4))
        if key in self._bounds:
            return self._bounds[key]
        top_down = self.kin.tool_rotation(np.array([1.0, 0.0, 0.0]), 0.0, 0.0)
        offsets = (corners - self.kin.center_offset) @ top_down.T
        rho, height = np.hypot(offsets[:, 0], offsets[:, 1]), offsets[:, 2]
        reach = float(np.linalg.norm(offsets, axis=1).max())
        count = max(1, math.ceil((tilt_range[1] - tilt_range[0]) / _TILT_STEP) + 1)
        theta = np.arange(_ANGLES) * 2.0 * math.pi / _ANGLES
        u = np.column_stack([np.cos(theta), np.sin(theta), np.zeros(_ANGLES)])
        support = np.full(_ANGLES, -np.inf)
        z_low, z_high = np.inf, -np.inf
        for tilt in np.linspace(tilt_range[0], tilt_range[1], count):
            lean = self.kin.tool_rotation(np.array([1.0, 0.0, 0.0]), 0.0, tilt) @ top_down.T
            normal, centres = lean[:, 2], np.outer(height, lean[:, 2])  # (corners, 3)
            spread = np.sqrt(np.clip(1.0 - (u @ normal) ** 2, 0.0, 1.0))  # (angles,)
            support = np.maximum(support, (centres @ u.T + np.outer(rho, spread)).max(axis=0))
            vertical = rho * math.sqrt(max(0.0, 1.0 - normal[2] ** 2))
            z_low = min(z_low, float((centres[:, 2] - vertical).min()))
            z_high = max(z_high, float((centres[:, 2] + vertical).max()))
        # Between tilt samples and between the 0.5 degree directions, points move at most
        # reach * half a step.
        spacing = (tilt_range[1] - tilt_range[0]) / (count - 1) if count > 1 else 0.0
        margin = reach * (spacing / 2 + math.pi / _ANGLES)
        result = (support + margin, z_low - margin, z_high + margin)
        self._bounds[key] = result
        return result
