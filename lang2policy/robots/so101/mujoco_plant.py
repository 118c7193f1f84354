"""A ``ServoPlant`` for the Feetech emulator whose joints are the MuJoCo SO-101's.

``ServoBusEmulator(ids, plant=MujocoPlant(world, calibration))`` answers like six STS3215 servos
whose shafts are the simulated joints: goal ticks become position-actuator targets through the
same ``Calibration`` the hardware backend uses, physics runs in step with the emulator's clock,
and present position / speed / load come back from the simulated joints.

Joint ``i`` of the plant is the servo ``servo_ids[i]`` (default: the calibration's ids in action
order), so create the emulator with the same ids in the same order. Torque off makes a joint
limp (its actuator's gain is zeroed), as an unpowered servo. The emulator calls the plant from
its thread under its own lock; anyone else reading the world should hold ``plant.lock``.

The servos' imperfections (``ServoBusEmulator(..., realism=...)``) are put in front of this
plant by the emulator (``RealisticPlant``): the goals it gets are then the shaft targets of
imperfect servos; ``gripper_joint`` tells it which joint's grasps may slip (the jaw eases
open for a moment and the physics decides what the object does).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import mujoco
import numpy as np

from lang2policy.robots.so101.calibration import GRIPPER, RAD_PER_TICK, Calibration
from lang2policy.scene.world import World


class MujocoPlant:
    def __init__(
        self,
        world: World,
        calibration: Calibration,
        *,
        servo_ids: Sequence[int] | None = None,
        set_initial_pose: bool = True,
        max_catch_up: float = 0.25,
    ) -> None:
        """``set_initial_pose``: the emulator's power-up positions (``positions=``, else tick
        2048) are written into the world; False keeps the world's pose (``present_ticks()``).
        ``max_catch_up``: the most simulated seconds one ``advance`` steps (a stalled clock
        jump is skipped rather than simulated)."""
        self.world = world
        self.calibration = calibration
        self.servo_ids = tuple(servo_ids) if servo_ids is not None else calibration.servo_ids
        self.set_initial_pose = set_initial_pose
        self.max_catch_up = max_catch_up
        self.lock = threading.RLock()
        model, arm = world.model, world.arm
        self._cal = [calibration.by_id(i) for i in self.servo_ids]
        self._actuator, self._qpos, self._dof = [], [], []
        for cal in self._cal:
            if cal.name == GRIPPER:
                act = int(arm.gripper_actuator_ids[0])
            else:
                act = int(arm.actuator_ids[arm.joint_names.index(cal.name)])
            joint = int(model.actuator_trnid[act, 0])
            self._actuator.append(act)
            self._qpos.append(int(model.jnt_qposadr[joint]))
            self._dof.append(int(model.jnt_dofadr[joint]))
        self._gain = model.actuator_gainprm[self._actuator].copy()
        self._bias = model.actuator_biasprm[self._actuator].copy()
        self._force_limit = np.maximum(
            np.abs(model.actuator_forcerange[self._actuator]).max(1), 1e-9
        )
        n = len(self._cal)
        self._goal = np.array([world.data.ctrl[a] for a in self._actuator], dtype=float)
        self._target = self._goal.copy()
        self._speed = np.zeros(n)  # rad/s, 0 = no ramp
        self._torque = np.ones(n, dtype=bool)
        self._offset: float | None = None  # sim time - emulator clock
        self._clock: float | None = None

    # -- ServoPlant ------------------------------------------------------------------------------

    def add_joint(self, joint: int, position: float) -> None:
        with self.lock:
            if self.set_initial_pose:
                rad = self._rad(joint, position)
                self.world.data.qpos[self._qpos[joint]] = rad
                self.world.data.qvel[self._dof[joint]] = 0.0
                self._goal[joint] = self._target[joint] = rad
                self._apply_targets()
                mujoco.mj_forward(self.world.model, self.world.data)

    def set_goal(self, joint: int, ticks: float, speed: float) -> None:
        with self.lock:
            self._goal[joint] = self._rad(joint, ticks)
            self._speed[joint] = abs(speed) * RAD_PER_TICK
            if self._speed[joint] == 0.0:
                self._target[joint] = self._goal[joint]
            self._apply_targets()

    def set_torque(self, joint: int, on: bool) -> None:
        with self.lock:
            self._torque[joint] = on
            act = self._actuator[joint]
            model = self.world.model
            model.actuator_gainprm[act] = self._gain[joint] if on else 0.0
            model.actuator_biasprm[act] = self._bias[joint] if on else 0.0
            if on:  # start from where the shaft is, then (maybe ramped) towards the goal
                self._target[joint] = (
                    self.world.data.qpos[self._qpos[joint]]
                    if self._speed[joint] > 0
                    else self._goal[joint]
                )
                self._apply_targets()

    def advance(self, now: float) -> None:
        with self.lock:
            data = self.world.data
            if self._offset is None or self._clock is None:
                self._offset, self._clock = data.time - now, now
                return
            dt = now - self._clock
            self._clock = max(now, self._clock)
            if dt <= 0:
                return
            target_time = now + self._offset
            if target_time - data.time > self.max_catch_up:
                self._offset -= target_time - data.time - self.max_catch_up
                target_time = data.time + self.max_catch_up
            step = self.world.model.opt.timestep
            while data.time + 0.5 * step < target_time:
                self._ramp(step)
                mujoco.mj_step(self.world.model, data)

    def position(self, joint: int) -> float:
        with self.lock:
            cal = self._cal[joint]
            return cal.zero + cal.sign * self.world.data.qpos[self._qpos[joint]] / RAD_PER_TICK

    def velocity(self, joint: int) -> float:
        with self.lock:
            return self._cal[joint].sign * self.world.data.qvel[self._dof[joint]] / RAD_PER_TICK

    def load(self, joint: int) -> float:
        with self.lock:
            force = self.world.data.actuator_force[self._actuator[joint]]
            return float(np.clip(self._cal[joint].sign * force / self._force_limit[joint], -1, 1))

    # -- helpers ---------------------------------------------------------------------------------

    @property
    def gripper_joint(self) -> int | None:
        """The plant joint of the gripper's servo (None without one): where a grasp may slip."""
        names = [cal.name for cal in self._cal]
        return names.index(GRIPPER) if GRIPPER in names else None

    def present_ticks(self) -> dict[int, int]:
        """The world's current joint positions as ticks by servo id (for ``positions=``)."""
        with self.lock:
            return {sid: round(self.position(j)) for j, sid in enumerate(self.servo_ids)}

    def restore_actuators(self) -> None:
        """Give every actuator its gains back (torque off zeroes them in the shared model)."""
        with self.lock:
            model = self.world.model
            for j, act in enumerate(self._actuator):
                model.actuator_gainprm[act] = self._gain[j]
                model.actuator_biasprm[act] = self._bias[j]
                self._torque[j] = True

    def _rad(self, joint: int, ticks: float) -> float:
        cal = self._cal[joint]
        return cal.sign * (ticks - cal.zero) * RAD_PER_TICK

    def _ramp(self, dt: float) -> None:
        ramped = self._speed > 0
        if not ramped.any():
            return
        error = self._goal - self._target
        step = np.clip(error, -self._speed * dt, self._speed * dt)
        self._target = np.where(ramped, self._target + step, self._goal)
        self._apply_targets()

    def _apply_targets(self) -> None:
        data = self.world.data
        for act, target in zip(self._actuator, self._target, strict=True):
            data.ctrl[act] = target
