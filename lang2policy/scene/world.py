"""The simulated tabletop world: model + data, seeded resets, stepping and named readouts.

Readouts are by name (``object_pose("red block")``, ``ee_pose()``, ``relation(a, b)``), so no
caller indexes ``qpos`` directly. Success checks in benchmarks and tests use these readouts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import mujoco
import numpy as np

from lang2policy.errors import UnknownObjectError
from lang2policy.scene.arm import ArmLayout, arm_layout
from lang2policy.scene.builder import build_scene, compile_scene
from lang2policy.scene.layout import LayoutConfig, choose_objects, load_layout, place_objects
from lang2policy.scene.objects import ObjectSpec
from lang2policy.scene.pose import Pose
from lang2policy.scene.robot_description import RobotDescription, load_robot_description

_PARK_Z = -0.73  # objects not in play rest on the floor under the table, out of every camera's view


@dataclass(frozen=True)
class ObjectHandle:
    spec: ObjectSpec
    body_id: int
    qpos_adr: int
    qvel_adr: int


class World:
    """A robot on the tabletop with a pool of objects; ``reset(seed)`` draws a new layout."""

    def __init__(self, robot: str = "so101", layout: str = "cap_tabletop", realism=None) -> None:
        """``realism``: a ``realism.RealismProfile``; each reset draws the seed's look from it
        (None or ``off``: the world as modelled)."""
        self.description: RobotDescription = load_robot_description(robot)
        self.layout: LayoutConfig = load_layout(layout)
        pool = self.layout.pool()
        self.realism = None if realism is None or realism.is_off else realism
        self.model = compile_scene(build_scene(self.description, pool, realism=self.realism))
        self.data = mujoco.MjData(self.model)
        self.nominal = None
        self.look = None  # the episode's look (``realism.scene_look.SceneLook``) or None
        self.rig: int | None = None  # set: objects' shades and table tint of this rig, not drawn
        if self.realism is not None:
            from lang2policy.realism.scene_look import Nominal

            self.nominal = Nominal.of(self.model)
        self.arm: ArmLayout = arm_layout(self.model, self.description)
        self.objects = {o.name: self._handle(o) for o in pool}
        self._body_owner = self._body_owners()
        self.present: list[str] = []
        self.seed: int | None = None
        self.reset(0)  # a world is always in a valid, seeded state

    def _handle(self, spec: ObjectSpec) -> ObjectHandle:
        body = self.model.body(spec.body_name)
        joint = body.jntadr[0]
        return ObjectHandle(
            spec, body.id, int(self.model.jnt_qposadr[joint]), int(self.model.jnt_dofadr[joint])
        )

    # ----------------------------------------------------------------- reset and stepping
    def reset(self, seed: int | None = None, objects: Sequence[str] | None = None) -> list[str]:
        """Arm to home, a seeded choice of objects placed on the table; returns their names."""
        rng = np.random.default_rng(seed)
        self.seed = seed
        names = (
            list(objects)
            if objects is not None
            else choose_objects(rng, self.layout, self.description.workspace.max_objects)
        )
        placements = place_objects(
            rng,
            names,
            self.layout.pool(),
            self.description.workspace,
            self.description.objects,
            self.layout.min_gap,
        )
        if self.realism is not None:  # before the reset: it computes the static cameras and lights
            self._draw_look(0 if seed is None else seed, [(p.x, p.y) for p in placements])
        mujoco.mj_resetData(self.model, self.data)
        self.data.qpos[self.arm.qpos_adr] = self.arm.home
        self.data.ctrl[self.arm.actuator_ids] = self.arm.home
        self.data.qpos[self.arm.gripper_qpos_adr] = self.arm.gripper_open
        self.data.ctrl[self.arm.gripper_actuator_ids] = self.arm.gripper_open
        for index, name in enumerate(sorted(self.objects)):
            self._park(name, index)
        for p in placements:
            self._set_object(p.name, p.x, p.y, self._rest_height(p.name), p.yaw)
        self.present = [p.name for p in placements]
        if self.look is not None:
            self.look.place_distractors(self)
        mujoco.mj_forward(self.model, self.data)
        self.step_seconds(self.layout.settle_time)
        return list(self.present)

    def calibrated_fovy(self, camera: str) -> float:
        """The field of view (degrees) of ``camera`` as its calibration knows it: the model's,
        before a realism look drew its error."""
        index = self.model.camera(camera).id
        source = self.model.cam_fovy if self.nominal is None else self.nominal.cam_fovy
        return float(source[index])

    def _draw_look(self, seed: int, taken: list[tuple[float, float]]) -> None:
        """Draw the seed's look and set it on the model (``taken``: the objects' places)."""
        from lang2policy.realism.scene_look import SceneLook

        self.look = SceneLook.draw(self.realism, seed, self, taken, rig=self.rig)
        self.look.apply_model(self)

    def _rest_height(self, name: str) -> float:
        return self.description.objects.block_half + 1e-4 if name.endswith("block") else 1e-4

    def _park(self, name: str, index: int) -> None:
        # A 4 x 5 grid under the back half of the table: hidden from every camera by the top.
        x = -0.32 + 0.15 * (index % 4)
        y = -0.4 + 0.2 * (index // 4 % 5)
        self._set_object(name, x, y, _PARK_Z + self._rest_height(name) - 1e-4, 0.0)

    def _set_object(self, name: str, x: float, y: float, z: float, yaw: float) -> None:
        handle = self.objects[name]
        adr = handle.qpos_adr
        self.data.qpos[adr : adr + 3] = (x, y, z)
        self.data.qpos[adr + 3 : adr + 7] = (math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2))
        self.data.qvel[handle.qvel_adr : handle.qvel_adr + 6] = 0.0

    def step(self, nstep: int = 1) -> None:
        mujoco.mj_step(self.model, self.data, nstep)

    def step_seconds(self, seconds: float) -> None:
        nstep = round(seconds / self.model.opt.timestep)
        if nstep > 0:
            self.step(nstep)

    @property
    def time(self) -> float:
        return float(self.data.time)

    # ----------------------------------------------------------------- arm commands
    def set_arm_targets(self, joints: np.ndarray, gripper_opening: float) -> None:
        """Position targets for the arm joints (rad) and the normalised gripper (0..1)."""
        self.data.ctrl[self.arm.actuator_ids] = joints
        self.data.ctrl[self.arm.gripper_actuator_ids] = self.arm.gripper_ctrl(gripper_opening)

    def arm_qpos(self) -> np.ndarray:
        return self.data.qpos[self.arm.qpos_adr].copy()

    def arm_qvel(self) -> np.ndarray:
        return self.data.qvel[self.arm.dof_adr].copy()

    def gripper_opening(self) -> float:
        return self.arm.gripper_opening(self.data.qpos)

    # ----------------------------------------------------------------- readouts
    def ee_pose(self) -> Pose:
        site = self.arm.ee_site_id
        return Pose.from_matrix(self.data.site_xpos[site], self.data.site_xmat[site].reshape(3, 3))

    def object_names(self) -> list[str]:
        return list(self.present)

    def handle(self, name: str) -> ObjectHandle:
        if name not in self.present:
            raise UnknownObjectError(
                f"no object named '{name}' on the table; objects present: {self.present}"
            )
        return self.objects[name]

    def object_pose(self, name: str) -> Pose:
        body = self.handle(name).body_id
        return Pose(self.data.xpos[body].copy(), self.data.xquat[body].copy())

    def object_size(self, name: str) -> float:
        """Half-size of a block, or radius of a bowl (metres)."""
        sizes = self.description.objects
        return sizes.block_half if self.handle(name).spec.kind == "block" else sizes.bowl_radius

    def object_kind(self, name: str) -> str:
        return self.handle(name).spec.kind

    def object_yaw(self, name: str) -> float:
        w, _, _, z = self.object_pose(name).quat
        return 2.0 * math.atan2(z, w)

    def contacts(self) -> set[tuple[str, str]]:
        """Touching pairs by name: objects by name, arm links as 'robot', 'table', 'world'."""
        pairs = set()
        for contact in self.data.contact[: self.data.ncon]:
            a, b = self._owner(contact.geom1), self._owner(contact.geom2)
            if a != b:
                pairs.add(tuple(sorted((a, b))))
        return pairs

    def _owner(self, geom_id: int) -> str:
        return self._body_owner[self.model.geom_bodyid[geom_id]]

    def _body_owners(self) -> list[str]:
        """Owner name per body: the object's name, 'robot' for the arm's subtree, else the
        name of the fixed body it belongs to ('table', or 'world' for the floor)."""
        robot_root = self.model.body_rootid[self.model.site_bodyid[self.arm.ee_site_id]]
        owners = []
        for body in range(self.model.nbody):
            root = self.model.body_rootid[body]
            owners.append("robot" if root == robot_root else self.model.body(root).name)
        for name, handle in self.objects.items():
            owners[handle.body_id] = name
        return owners

    def is_in(self, a: str, b: str) -> bool:
        """Object ``a`` rests inside bowl ``b`` (within its rim, below the rim height)."""
        bowl = self.handle(b)
        if bowl.spec.kind != "bowl":
            return False
        pa, pb = self.object_pose(a).position, self.object_pose(b).position
        sizes = self.description.objects
        inside = math.hypot(*(pa[:2] - pb[:2])) < sizes.bowl_radius - 0.5 * self.object_size(a)
        return bool(inside and pb[2] < pa[2] < pb[2] + sizes.bowl_height + self.object_size(a))

    def is_on(self, a: str, b: str) -> bool:
        """Object ``a`` rests on top of block ``b`` (or inside bowl ``b``)."""
        if self.handle(b).spec.kind == "bowl":
            return self.is_in(a, b)
        pa, pb = self.object_pose(a).position, self.object_pose(b).position
        half = self.object_size(b)
        stacked_height = self.object_size(a) + half
        return bool(
            math.hypot(*(pa[:2] - pb[:2])) < half and abs(pa[2] - pb[2] - stacked_height) < 0.01
        )

    def relations(self) -> list[tuple[str, str, str]]:
        """Every (a, 'in'|'on', b) that holds between present objects."""
        found = []
        for a in self.present:
            for b in self.present:
                if a == b:
                    continue
                if self.handle(b).spec.kind == "bowl" and self.is_in(a, b):
                    found.append((a, "in", b))
                elif self.handle(b).spec.kind == "block" and self.is_on(a, b):
                    found.append((a, "on", b))
        return found
