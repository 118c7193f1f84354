"""The planning model: the scene with only the objects in play, a coarser step, and sensors.

MJPC plans on a copy of the task model whose timestep is ``agent_timestep``; we do the same. The
copy holds only the objects present on the table (the world keeps its whole pool parked under
the table, which would cost rollouts for nothing) and carries sensors for everything a reward
term reads (see ``features.Features``). State is copied in by name, from a ``World`` in
simulation or from measurements (``/joint_states`` + ``/lang2policy/objects``) on a real arm.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import mujoco
import numpy as np

from lang2policy.errors import ConfigError, UnknownObjectError
from lang2policy.rewards.features import Features, rotate
from lang2policy.scene.arm import arm_layout
from lang2policy.scene.builder import build_scene, compile_scene
from lang2policy.scene.layout import load_layout
from lang2policy.scene.objects import ObjectSpec, body_name
from lang2policy.scene.robot_description import RobotDescription, load_robot_description

FULLPHYSICS = mujoco.mjtState.mjSTATE_FULLPHYSICS
# Arm bodies whose origins must stay above the table (besides the tool centre).
_CLEARANCE_BODIES = (
    "wrist", "gripper", "moving_jaw_so101_v1", "hand", "left_finger", "right_finger",
)


@dataclass(frozen=True)
class ObjectState:
    """A measured object pose (and optional velocity) in the world frame."""

    position: Sequence[float]
    quat: Sequence[float] = (1.0, 0.0, 0.0, 0.0)
    velocity: Sequence[float] = (0.0, 0.0, 0.0)


class PlanningModel:
    """A compiled planning copy of the scene for one robot and one set of objects."""

    def __init__(
        self,
        robot: str | RobotDescription,
        objects: Sequence[str],
        timestep: float = 0.01,
        layout: str = "cap_tabletop",
    ) -> None:
        if not 0.0005 <= timestep <= 0.05:
            raise ConfigError(f"planning timestep {timestep} s is outside [0.0005, 0.05] s")
        self.description = (
            robot if isinstance(robot, RobotDescription) else load_robot_description(robot)
        )
        pool = {o.name: o for o in load_layout(layout).pool()}
        unknown = [n for n in objects if n not in pool]
        if unknown:
            raise UnknownObjectError(f"objects {unknown} are not in layout '{layout}'; "
                                     f"valid objects: {sorted(pool)}")
        self.object_names = tuple(objects)
        sizes = self.description.objects
        # Height of each object's origin when it rests on the table (blocks: their centre).
        self.rest_z = {n: sizes.block_half if pool[n].kind == "block" else 0.0 for n in objects}
        specs: list[ObjectSpec] = [pool[n] for n in objects]
        scene = build_scene(self.description, specs)
        self._sensor_slices: dict[str, slice] = {}
        self._add_sensors(scene)
        self.model = compile_scene(scene)
        self.model.opt.timestep = timestep
        self.arm = arm_layout(self.model, self.description)
        self.center_offset = np.array(self.description.grasp.center_offset, float)
        self._index_sensors()
        self._object_adr = {
            n: (int(self.model.jnt_qposadr[self.model.body(body_name(n)).jntadr[0]]),
                int(self.model.jnt_dofadr[self.model.body(body_name(n)).jntadr[0]]))
            for n in objects
        }
        self.data = mujoco.MjData(self.model)
        self.state_size = mujoco.mj_stateSize(self.model, FULLPHYSICS)
        ranges = self.model.actuator_ctrlrange
        self.ctrl_low, self.ctrl_high = ranges[:, 0].copy(), ranges[:, 1].copy()

    # ----------------------------------------------------------------- sensors
    def _add_sensors(self, scene: mujoco.MjSpec) -> None:
        site = self.description.ee_site
        self._sensor_order: list[tuple[str, int]] = []

        def add(name: str, kind: mujoco.mjtSensor, objtype: mujoco.mjtObj, obj: str, dim: int):
            scene.add_sensor(name=name, type=kind, objtype=objtype, objname=obj)
            self._sensor_order.append((name, dim))

        s = mujoco.mjtSensor
        add("tool_pos", s.mjSENS_FRAMEPOS, mujoco.mjtObj.mjOBJ_SITE, site, 3)
        add("tool_quat", s.mjSENS_FRAMEQUAT, mujoco.mjtObj.mjOBJ_SITE, site, 4)
        add("tool_vel", s.mjSENS_FRAMELINVEL, mujoco.mjtObj.mjOBJ_SITE, site, 3)
        for obj in self.object_names:
            body = body_name(obj)
            add(f"{body}:pos", s.mjSENS_FRAMEPOS, mujoco.mjtObj.mjOBJ_XBODY, body, 3)
            add(f"{body}:quat", s.mjSENS_FRAMEQUAT, mujoco.mjtObj.mjOBJ_XBODY, body, 4)
            add(f"{body}:vel", s.mjSENS_FRAMELINVEL, mujoco.mjtObj.mjOBJ_XBODY, body, 3)
        self._clearance = [b for b in _CLEARANCE_BODIES if scene.body(b) is not None]
        for body in self._clearance:
            add(f"clear:{body}", s.mjSENS_FRAMEPOS, mujoco.mjtObj.mjOBJ_XBODY, body, 3)

    def _index_sensors(self) -> None:
        start = 0
        for name, dim in self._sensor_order:
            self._sensor_slices[name] = slice(start, start + dim)
            start += dim
        self.nsensordata = start
        if start != self.model.nsensordata:
            raise ConfigError("the planning model's sensors do not add up (internal error)")

    # ----------------------------------------------------------------- features
    def features(self, sensordata: np.ndarray, ctrl: np.ndarray, qpos_arm: np.ndarray,
                 dt: float | None = None) -> Features:
        """Named arrays from ``sensordata [K, T, n]``, controls ``[K, T, nu]`` and the arm's
        joint positions ``[K, T, dof + gripper joints]`` (see ``arm_and_gripper``)."""
        s = self._sensor_slices
        tool_quat = sensordata[..., s["tool_quat"]]
        tool = sensordata[..., s["tool_pos"]] + rotate(tool_quat, self.center_offset)
        approach = np.array(self.description.approach_axis, float)
        objects = {
            n: {
                "pos": sensordata[..., s[f"{body_name(n)}:pos"]],
                "quat": sensordata[..., s[f"{body_name(n)}:quat"]],
                "vel": sensordata[..., s[f"{body_name(n)}:vel"]],
                "rest_z": self.rest_z[n],
            }
            for n in self.object_names
        }
        points = [sensordata[..., s[f"clear:{b}"]] for b in self._clearance] + [tool]
        dof = self.arm.dof
        gripper_q = qpos_arm[..., dof:].mean(axis=-1)
        span = self.arm.gripper_open - self.arm.gripper_closed
        width = self.ctrl_high - self.ctrl_low
        return Features(
            tool=tool,
            tool_vel=sensordata[..., s["tool_vel"]],
            tool_axis=rotate(tool_quat, approach),
            closing_axis=rotate(tool_quat, self.center_offset / np.linalg.norm(self.center_offset)),
            objects=objects,
            gripper=np.clip((gripper_q - self.arm.gripper_closed) / span, 0.0, 1.0),
            arm_q=qpos_arm[..., :dof],
            home_q=self.arm.home,
            clearance_points=np.stack(points, axis=-2),
            ctrl=(ctrl - self.ctrl_low) / width,
            dt=float(dt if dt is not None else self.model.opt.timestep),
        )

    @property
    def arm_qpos_adr(self) -> np.ndarray:
        """qpos addresses of the arm joints followed by the gripper joints."""
        return np.concatenate([self.arm.qpos_adr, self.arm.gripper_qpos_adr])

    def features_now(self, data: mujoco.MjData | None = None, forward: bool = True) -> Features:
        """Features of one state (``K = T = 1``), after ``mj_forward`` unless the caller
        has just run it (``forward=False``)."""
        data = self.data if data is None else data
        if forward:
            mujoco.mj_forward(self.model, data)
        sensordata = data.sensordata.reshape(1, 1, -1)
        qpos = data.qpos[self.arm_qpos_adr].reshape(1, 1, -1)
        return self.features(sensordata, data.ctrl.reshape(1, 1, -1), qpos)

    # ----------------------------------------------------------------- state in
    def load_world(self, world) -> None:
        """Copy a simulated ``World``'s arm, objects and controls into ``self.data``."""
        missing = [n for n in self.object_names if n not in world.present]
        if missing:
            raise UnknownObjectError(f"objects {missing} are not on the table; "
                                     f"present: {world.present}")
        d = self.data
        d.time = world.data.time
        d.qpos[self.arm_qpos_adr] = world.data.qpos[
            np.concatenate([world.arm.qpos_adr, world.arm.gripper_qpos_adr])]
        d.qvel[_arm_dofs(self.model, self.arm)] = world.data.qvel[
            _arm_dofs(world.model, world.arm)]
        for name, (qadr, vadr) in self._object_adr.items():
            handle = world.objects[name]
            d.qpos[qadr:qadr + 7] = world.data.qpos[handle.qpos_adr:handle.qpos_adr + 7]
            d.qvel[vadr:vadr + 6] = world.data.qvel[handle.qvel_adr:handle.qvel_adr + 6]
        d.ctrl[:] = world.data.ctrl[: self.model.nu]
        d.act[:] = 0.0

    def load_measurements(
        self,
        time: float,
        joint_positions: Mapping[str, float],
        objects: Mapping[str, ObjectState],
        joint_velocities: Mapping[str, float] | None = None,
        ctrl: np.ndarray | None = None,
    ) -> None:
        """Set the state from measured joints (by name, the gripper joint included) and
        object poses; unmeasured velocities are zero, controls default to the positions."""
        d = self.data
        names = [*self.arm.joint_names, *self.gripper_joint_names]
        missing = [n for n in names if n not in joint_positions]
        if missing:
            raise ConfigError(f"joint state lacks {missing}; expected joints {names}")
        absent = [n for n in self.object_names if n not in objects]
        if absent:
            raise UnknownObjectError(f"no pose for objects {absent}; got {sorted(objects)}")
        d.time = time
        velocities = joint_velocities or {}
        for name in names:
            joint = self.model.joint(name)
            d.qpos[joint.qposadr[0]] = joint_positions[name]
            d.qvel[joint.dofadr[0]] = velocities.get(name, 0.0)
        for name, (qadr, vadr) in self._object_adr.items():
            state = objects[name]
            d.qpos[qadr:qadr + 3] = state.position
            d.qpos[qadr + 3:qadr + 7] = state.quat
            d.qvel[vadr:vadr + 3] = state.velocity
            d.qvel[vadr + 3:vadr + 6] = 0.0
        if ctrl is None:
            ctrl = np.array([joint_positions[self.model.joint(
                self.model.actuator_trnid[a, 0]).name] for a in range(self.model.nu)])
        d.ctrl[:] = np.clip(ctrl, self.ctrl_low, self.ctrl_high)

    def set_object_pose(self, name: str, position: Sequence[float],
                        quat: Sequence[float] = (1.0, 0.0, 0.0, 0.0)) -> None:
        """Put object ``name`` at rest at ``position`` (world) with orientation ``quat``."""
        qadr, vadr = self._object_adr[name]
        self.data.qpos[qadr:qadr + 3] = position
        self.data.qpos[qadr + 3:qadr + 7] = quat
        self.data.qvel[vadr:vadr + 6] = 0.0

    @property
    def gripper_joint_names(self) -> list[str]:
        """Names of the joints the gripper actuators drive (measured like arm joints)."""
        return [self.model.joint(self.model.actuator_trnid[a, 0]).name
                for a in self.arm.gripper_actuator_ids]

    def state(self) -> np.ndarray:
        """The full physics state of ``self.data`` (what rollouts start from)."""
        state = np.empty(self.state_size)
        mujoco.mj_getState(self.model, self.data, state, FULLPHYSICS)
        return state


def _arm_dofs(model: mujoco.MjModel, arm) -> np.ndarray:
    """dof addresses of the arm joints followed by the gripper joints."""
    gripper = [model.jnt_dofadr[model.actuator_trnid[a, 0]] for a in arm.gripper_actuator_ids]
    return np.concatenate([arm.dof_adr, np.array(gripper, int)])
