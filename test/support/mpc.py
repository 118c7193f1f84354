"""A plant for the real-time MPC tests (no ROS): a ``World`` stepped at wall speed in a thread
that feeds ``RealtimeMPC`` (or ``ProcessMPC``) measured states and applies its actions, like the
controller node does; two tool targets and the reward spec that reaches one."""

from __future__ import annotations

import threading
import time

import mujoco
import numpy as np

from lang2policy.mpc.model import ObjectState
from lang2policy.mpc.realtime import RealtimeMPC
from lang2policy.rewards.spec import validate_spec
from lang2policy.scene.world import World

PERIOD = 0.02  # control period (s of sim time, paced at wall speed)


POINT_A = (0.22, 0.08, 0.14)


POINT_B = (0.20, -0.10, 0.08)


class Plant:
    """A World stepped at wall speed in a thread: state out, the MPC's action in."""

    def __init__(self, mpc: RealtimeMPC | None, seed: int = 0) -> None:
        self.world = World("so101")
        self.objects = self.world.reset(seed)
        self.mpc = mpc
        self.offset = np.array(self.world.description.grasp.center_offset)
        self.steps = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def state(self) -> tuple[float, dict[str, float], dict[str, ObjectState]]:
        w = self.world
        joints = dict(zip(w.arm.joint_names, (float(q) for q in w.arm_qpos()), strict=True))
        joints["gripper"] = w.gripper_opening()
        objects = {}
        for name in self.objects:
            pose = w.object_pose(name)
            objects[name] = ObjectState(pose.position, pose.quat)
        return w.time, joints, objects

    def tool(self) -> np.ndarray:
        w = self.world
        mujoco.mj_kinematics(w.model, w.data)
        site = w.arm.ee_site_id
        return w.data.site_xpos[site] + w.data.site_xmat[site].reshape(3, 3) @ self.offset

    def step(self) -> None:
        action = self.mpc.action(self.world.time)
        if action is not None:
            joints = np.array([action[n] for n in self.world.arm.joint_names])
            self.world.set_arm_targets(joints, action["gripper"])
        self.world.step_seconds(PERIOD)
        self.steps += 1
        self.mpc.update_state(*self.state())

    def _run(self) -> None:
        began = time.monotonic()
        while not self._stop.is_set():
            self.step()
            time.sleep(max(0.0, began + self.steps * PERIOD - time.monotonic()))

    def __enter__(self) -> Plant:
        self.mpc.update_state(*self.state())
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def tool_spec(point, objects, duration: float = 30.0, success: dict | None = None):
    data = {"task": f"tool to {list(point)}", "duration": duration,
            "terms": [{"term": "tool_to_point", "params": {"point": list(point)}}]}
    if success:
        data["success"] = success
    return validate_spec(data, objects).spec
