"""A ``World`` that mirrors a robot it does not simulate: measured states in, no physics.

The skills, their privilege checks and the planner's scene read-outs all ask a ``World``
(object poses, bounding boxes, who rests in which bowl). In the ROS graph the arm and the
objects live elsewhere (the sim node, or a real table seen by perception), so the planner keeps
a ``MirrorWorld``: the same MuJoCo scene, whose joint positions are *set* from the latest
``/joint_states`` and ``/lang2policy/objects`` and then forwarded (``mj_forward``: kinematics
and contacts, never a physics step). Every query then answers about the real scene.

With camera perception the mirror carries a held object itself (``held``): a camera cannot
see a block in the jaws (they hide it), and perception keeps it where it lay until the view
shows the table there, then drops it. The held object's pose is then its pose in the ee frame
at the grasp, carried along by the arm: a program asking where the block it holds is gets an
answer (ground truth needs none of this: its sessions pass no ``held``).

Objects the scene model does not know (a name outside the layout's pool) cannot be mirrored;
they are listed in ``unknown`` so the caller can say so once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import mujoco
import numpy as np

from lang2policy.scene.pose import Pose
from lang2policy.scene.world import World


class MirrorWorld(World):
    """``World`` whose state is set from measurements (``sync``) instead of simulated."""

    def __init__(self, robot: str = "so101", layout: str = "cap_tabletop") -> None:
        super().__init__(robot, layout)
        self.present = []
        self.unknown: list[str] = []

    def sync(
        self,
        arm_joints: Sequence[float] | None = None,
        gripper_opening: float | None = None,
        objects: Mapping[str, tuple[Sequence[float], Sequence[float]]] | None = None,
        held: tuple[str, Pose] | None = None,
    ) -> None:
        """Set the arm (rad), the normalised gripper and ``objects`` (name -> (position,
        quat w-x-y-z)) from measurements, then forward the model. ``None`` keeps that part;
        ``objects`` replaces the whole set (absent pool objects are parked off the table).
        ``held``: (name, pose in the ee frame) of what the gripper holds, carried by the
        gripper whatever ``objects`` says of it (see the module docstring)."""
        data, arm = self.data, self.arm
        if arm_joints is not None:
            data.qpos[arm.qpos_adr] = np.asarray(arm_joints, float)
        if gripper_opening is not None:
            data.qpos[arm.gripper_qpos_adr] = arm.gripper_ctrl(float(gripper_opening))
        if objects is not None:
            self._sync_objects(self._with_held(objects, held))
        data.qvel[:] = 0.0
        mujoco.mj_forward(self.model, data)

    def _with_held(self, objects, held: tuple[str, Pose] | None):
        """``objects`` with the held object where the gripper carries it."""
        if held is None or held[0] not in self.objects:
            return objects
        mujoco.mj_kinematics(self.model, self.data)  # the ee where the arm now is
        ee, (name, in_hand) = self.ee_pose(), held
        rotation = ee.rotation()
        carried = Pose.from_matrix(
            ee.position + rotation @ in_hand.position, rotation @ in_hand.rotation()
        )
        return {**objects, name: (carried.position, carried.quat)}

    def _sync_objects(self, objects: Mapping[str, tuple[Sequence[float], Sequence[float]]]) -> None:
        self.unknown = sorted(name for name in objects if name not in self.objects)
        for index, name in enumerate(sorted(self.objects)):
            if name not in objects:
                self._park(name, index)
                continue
            position, quat = objects[name]
            adr = self.objects[name].qpos_adr
            self.data.qpos[adr : adr + 3] = np.asarray(position, float)
            quat = np.asarray(quat, float)
            self.data.qpos[adr + 3 : adr + 7] = quat / (np.linalg.norm(quat) or 1.0)
        self.present = [name for name in objects if name in self.objects]  # as measured

    def step(self, nstep: int = 1) -> None:
        """A mirror never simulates: time passes on the real robot, not here."""

    def reset(self, seed: int | None = None, objects: Sequence[str] | None = None) -> list[str]:
        """Layout draws are for simulation; the mirror keeps what was last measured (the
        initial reset in ``World.__init__`` runs once, and ``present`` then starts empty)."""
        if not hasattr(self, "unknown"):  # World.__init__'s first reset
            return super().reset(seed, objects)
        return list(self.present)
