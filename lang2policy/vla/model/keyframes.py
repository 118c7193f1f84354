"""Keyframes: the scene a VLA sees, lifted into the arm's joint space by its own IK
(``VLAConfig.keyframes``).

Why: a motor part that reads the named block's and the goal's *positions* must learn the arm's
inverse kinematics from a few hundred demonstrations, and it did not: fed the true scene, the
latched network's reach missed the block by 3-8 cm. The demonstrations' oracle plans every
motion from a handful of joint configurations (above the block, at its grasp point, above and
at the drop point, the push's start and end), so the motor part is given those
configurations, solved from the scene state by the same planners (``control.tool_paths``,
``control.pusher``) on an estimated scene: what remains to learn is when to move from one to
the next, how fast, and the gripper. The scene state comes from the images (the perception
part); only its lifting into joints is geometry.

The keyframes do not depend on the task family (the words pick which ones matter): every set
is computed from the scene state alone, the push's direction from the block towards the goal.
A keyframe no posture reaches is the IK's best attempt, never an error: the features exist for
every scene, and a task the arm cannot do fails in the judge, not here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from lang2policy.control.kinematics import Kinematics
from lang2policy.control.pusher import plan_push
from lang2policy.control.tool_paths import ToolPaths, above
from lang2policy.errors import ConfigError, UnreachableError
from lang2policy.scene.pose import Pose

NAMES = (
    "above_block", "grasp", "lifted", "above_drop", "drop", "above_push", "push_start", "push_end",
)  # fmt: skip
PUSH_MIN = 0.01  # m: a goal this close to the block horizontally is not a push (a lift)
LIFT = 0.08  # m: the "lifted" keyframe's tool above the block's rest (``tasks.LIFT_HEIGHT``)
DROP_CLEARANCE = 0.02  # m: the held block is let go this far above its resting height
BOWL_FLOOR = 0.008  # m: a bowl's floor above its pose (``MotionPrimitives.drop_point``)


@dataclass(frozen=True)
class _Objects:
    """A ``SceneQuery`` holding one object, "block": the named block at its estimated pose
    (what the push planner asks about)."""

    block: Pose
    half_size: float

    def object_names(self) -> list[str]:
        return ["block"]

    def object_pose(self, name: str) -> Pose:
        return self.block

    def object_kind(self, name: str) -> str:
        return "block"

    def object_size(self, name: str) -> float:
        return self.half_size


class KeyframePlanner:
    """Keyframes of an arm for scene states (``environment_state``'s layout)."""

    def __init__(self, kinematics: Kinematics) -> None:
        self.kin = kinematics
        self.home = np.asarray(kinematics.arm.home, float).copy()
        self.paths = ToolPaths(kinematics, lambda: self.home)
        self.grasp = kinematics.description.grasp
        self.half = float(kinematics.description.objects.block_half)
        self.scene: _Objects | None = None  # for the push planner (``PushContext``)
        self.dof = len(self.home)

    @property
    def dim(self) -> int:
        """Values per scene: one joint configuration per keyframe."""
        return len(NAMES) * self.dof

    def joints(self) -> np.ndarray:
        """Where every plan starts: the arm's home posture (``PushContext``)."""
        return self.home

    def keyframes(self, scene: np.ndarray) -> np.ndarray:
        """``float32 [len(NAMES) * dof]``: the joints of every keyframe of ``scene`` (block
        x, y, z, goal x, y, z, cos 4 yaw, sin 4 yaw)."""
        scene = np.asarray(scene, float)
        if scene.shape != (8,) or not np.all(np.isfinite(scene)):
            raise ConfigError(f"keyframes need a finite 8-value scene state, got {scene.shape}")
        block, goal = scene[:3], scene[3:6]
        yaw = math.atan2(scene[7], scene[6]) / 4
        grasp_yaw = self.kin.grasp_yaw(block, yaw, math.pi / 2)
        grasp_point = above(block, self.grasp.grasp_offset)
        above_block, grasp = self._vertical(grasp_point, grasp_yaw)
        lifted = self._lifted(grasp_point, block, above_block)
        drop = above(goal, BOWL_FLOOR + self.half + DROP_CLEARANCE)
        drop_yaw = self.kin.grasp_yaw(drop, self.kin.natural_yaw(drop), math.pi / 2)
        above_drop, at_drop = self._vertical(drop, drop_yaw)
        push = self._push(block, yaw, goal)
        frames = [above_block, grasp, lifted, above_drop, at_drop, *push]
        return np.concatenate(frames).astype(np.float32)

    def _lifted(self, grasp_point: np.ndarray, block: np.ndarray, seed: np.ndarray) -> np.ndarray:
        """Joints of the lift as the oracle ends it: the tool ``LIFT`` above the block's rest
        height, over the grasp, at the arm's natural yaw there (``oracle.run_oracle`` moves
        there from above the block with ``move_to_position``)."""
        point = np.array([grasp_point[0], grasp_point[1], block[2] + LIFT])
        yaw = self.kin.natural_yaw(point)
        paths = ToolPaths(self.kin, lambda: seed)  # seeded where the lift starts, as the oracle
        try:  # the oracle's own move (``MotionPrimitives.plan_move_to``)
            return paths.reach_or_lean(point, yaw, "keyframe")
        except UnreachableError:
            return self._solve(point, yaw, seed)  # the IK's best attempt

    def _vertical(self, point: np.ndarray, yaw: float) -> tuple[np.ndarray, np.ndarray]:
        """(joints above ``point``, joints at it) as the pick and place primitives go down."""
        try:
            _, line = self.paths.vertical(point, yaw, self.grasp.approach_height, "keyframe")
            return line[0], line[-1]
        except UnreachableError:
            top = self._solve(above(point, self.grasp.approach_height), yaw, self.home)
            return top, self._solve(point, yaw, top)

    def _push(self, block: np.ndarray, yaw: float, goal: np.ndarray) -> list[np.ndarray]:
        """(above the push's start, its start, its end), from the push planner; for a goal
        straight above the block (a lift), a push radially outward stands in."""
        target = goal[:2]
        if np.linalg.norm(target - block[:2]) < PUSH_MIN:
            radial = block[:2] / max(float(np.linalg.norm(block[:2])), 1e-6)
            target = block[:2] + 0.07 * radial
        turn = np.array([math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)])  # about z
        self.scene = _Objects(Pose(block.copy(), turn), self.half)
        try:
            plan = plan_push(self, "block", target)
            return [plan.down[0], plan.down[-1], plan.along[-1]]
        except UnreachableError:
            heading = math.atan2(*(target - block[:2])[::-1])
            start = np.array([*block[:2], self.half]) - 0.04 * np.array(
                [math.cos(heading), math.sin(heading), 0.0]
            )
            end = np.array([*target, self.half])
            top = self._solve(above(start, self.grasp.approach_height), heading, self.home)
            return [top, self._solve(start, heading, top), self._solve(end, heading, top)]

    def _solve(self, point: np.ndarray, yaw: float, seed: np.ndarray) -> np.ndarray:
        """Joints putting the tool centre at ``point``: the first configured tilt that
        reaches it, else the IK's best attempt."""
        for tilt in self.grasp.tilts:
            try:
                return self.paths.solve(point, yaw, tilt, seed, "keyframe")
            except UnreachableError:
                continue
        rotation = self.kin.tool_rotation(point, yaw, self.grasp.tilts[0])
        target = self.kin.site_target(np.asarray(point, float), rotation)
        return self.kin.solve(target, rotation, seed).q


def planner_for_robot(robot: str = "so101") -> KeyframePlanner:
    """The keyframe planner of ``robot``'s simulated arm (builds its scene model once)."""
    from lang2policy.scene.world import World  # the scene compiler: only when asked

    world = World(robot)
    return KeyframePlanner(Kinematics(world.model, world.description, world.arm))


def normalize_keyframes(frames: np.ndarray, state_mean: np.ndarray, state_std: np.ndarray):
    """Keyframes ``[..., len(NAMES) * dof]`` in the state's normalised units (each joint by the
    state statistics of that joint), as the action head reads them."""
    frames = np.asarray(frames, np.float32)
    dof = frames.shape[-1] // len(NAMES)
    shaped = frames.reshape(*frames.shape[:-1], len(NAMES), dof)
    mean, std = np.asarray(state_mean)[:dof], np.asarray(state_std)[:dof]
    return ((shaped - mean) / std).reshape(frames.shape).astype(np.float32)


def episode_keyframes(
    planner: KeyframePlanner,
    environment: np.ndarray,
    spans: list[tuple[int, int]],
    progress: bool = True,
) -> np.ndarray:
    """Per frame, the keyframes of its episode's first scene (``float32 [N, dim]``) for the
    episodes ``spans`` (start, end) names; frames of no listed episode get zeros (scene views:
    their action is never learnt). Each episode is solved once (about 0.1-0.3 s)."""
    from tqdm import tqdm

    environment = np.asarray(environment)
    frames = np.zeros((len(environment), planner.dim), np.float32)
    for start, end in tqdm(spans, desc="keyframes", unit="episode", disable=not progress):
        frames[start:end] = planner.keyframes(environment[start])
    return frames
