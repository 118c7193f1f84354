"""Corrected episodes, Yell At Your Robot style (issue 18, item 5): the VLA runs closed loop in
simulation while a scripted person (``corrector``) corrects it in words, and every frame is
kept for fine-tuning (``lang2policy record corrections``). The command runs the episodes in
worker processes on this machine or on Ray (``corrected_in_workers``, each worker its own
policy and simulation) and writes them in order (``write_corrections``): the same dataset,
byte for byte, whichever executor ran them.

The loop is the rollout's (``rollout.RolloutRunner``: same scenes, frames, judge and success
hold), with the VLA node's shaping between the policy and the arm (``skill.shaping``): each
correction is said before the policy acts on a frame, taken by ``TargetShaper.motion``, and
acts from that frame's action on as the language motion's joint residual (blended in at the
speed cap), under the node's default limits (config/safety.yaml's joint speed
and workspace). The policy is shown the measured joints less the residual, as in the node.

Each frame records the camera images, the measured state, the **executed** action (the
policy's target plus the residual, within the limits: the corrected behaviour), the policy's
own target, the residual, the scene state (``environment_state``) and the index of the
correction said at that frame (-1: none).

How this relates to YAY Robot (anchors-vla-rl.md, A4): YAY's person corrects the *high-level*
policy's language instruction, and YAY fine-tunes only that high level on the corrections; its
low-level policy executes the corrected instruction. Here there is no learned high level: the
corrections are executed as residuals, and what is fine-tuned is the visuomotor policy itself,
on the corrected executions, which makes this intervention data as in DAgger / HG-DAgger (the
labels are the corrected actions on the states the policy itself reached), with language as
the means of intervention rather than teleoperation. The person is a script that sees the
true scene; nobody was asked.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from lang2policy.control.pusher import face_centre, gripper_geoms, object_top
from lang2policy.parallel.executor import Executor, run_ordered
from lang2policy.safety.config import load_safety_config
from lang2policy.vla.coach.corrector import (
    FAMILIES,
    CorrectorSettings,
    ScriptedCorrector,
    SpokenCorrector,
)
from lang2policy.vla.coach.push_corrector import PushCorrector
from lang2policy.vla.dataset import DatasetWriter, EpisodeRecord
from lang2policy.vla.dataset.interventions import CORRECTION
from lang2policy.vla.eval.rollout import SUCCESS_HOLD, Policy, Rollout, RolloutRunner
from lang2policy.vla.sim.environment_state import ENV_NAMES, environment_state, task_goal
from lang2policy.vla.sim.episodes import EpisodeSpec
from lang2policy.vla.sim.judge import judge, start_positions
from lang2policy.vla.sim.oracle import push_target
from lang2policy.vla.skill.limits import SkillLimits, ToolKinematics
from lang2policy.vla.skill.message import Box
from lang2policy.vla.skill.shaping import TargetShaper
from lang2policy.vla.spec.schema import CAMERAS, FPS, JOINT_NAMES, ROBOT_TYPE, STATE_NAMES
from lang2policy.vla.spec.tasks import SIDE_DIRECTIONS

NO_CORRECTION = -1
# The dataset's columns beyond the demonstrations' (a reader without them loads it all the same).
POLICY_ACTION, RESIDUAL = "action.policy", "action.residual"
EPISODE_COLUMNS = (
    "success", "family", "split", "seed", "phrasing", "combination", "detail", "view",
    "corrections", "corrections_applied", "correction_texts",
)  # fmt: skip


@dataclass
class CorrectedRollout(Rollout):
    """A rollout with its frames and corrections (``corrections[i]``: (frame, text, applied))."""

    images: dict[str, list[np.ndarray]] = field(default_factory=dict)
    state: list[np.ndarray] = field(default_factory=list)
    action: list[np.ndarray] = field(default_factory=list)  # executed: policy + residual
    policy_action: list[np.ndarray] = field(default_factory=list)
    residual: list[np.ndarray] = field(default_factory=list)  # arm joints (rad)
    environment: list[np.ndarray] = field(default_factory=list)
    correction: list[int] = field(default_factory=list)  # per frame: index or NO_CORRECTION
    corrections: list[tuple[int, str, bool]] = field(default_factory=list)

    def arrays(self) -> dict[str, np.ndarray]:
        """The per-frame lists as arrays (images per camera uint8 (T, H, W, 3))."""
        return {
            **{f"image.{c}": np.stack(frames) for c, frames in self.images.items()},
            "state": np.stack(self.state).astype(np.float32),
            "action": np.stack(self.action).astype(np.float32),
            "policy_action": np.stack(self.policy_action).astype(np.float32),
            "residual": np.stack(self.residual).astype(np.float32),
            "environment": np.stack(self.environment).astype(np.float32),
            "correction": np.asarray(self.correction, np.int64),
        }


def node_limits(robot: str = ROBOT_TYPE) -> SkillLimits:
    """The VLA node's default limits: config/safety.yaml's joint speed and workspace box."""
    safety = load_safety_config(robot)
    box = Box(tuple(safety.workspace.min), tuple(safety.workspace.max))  # type: ignore[arg-type]
    return SkillLimits(safety.max_joint_speed, box)


class CorrectedRunner(RolloutRunner):
    """``RolloutRunner`` whose episodes a ``ScriptedCorrector`` corrects (module docstring)."""

    def __init__(self, settings: CorrectorSettings | None = None, start: str = "rest") -> None:
        super().__init__(start=start)
        self.settings = settings or CorrectorSettings()
        self.tool = ToolKinematics(self.session.kinematics, JOINT_NAMES)
        self.limits = node_limits()
        self.corrector: SpokenCorrector | None = None
        self._watch: Callable[[np.ndarray], np.ndarray] | None = None

    def run(
        self, policy: Policy, spec: EpisodeSpec, video: bool = False, max_seconds: float = 0.0
    ) -> CorrectedRollout:
        """One corrected episode of ``spec`` (a task family of ``corrector.FAMILIES``)."""
        if spec.task.family not in FAMILIES:
            raise ValueError(
                f"the scripted corrector knows the families {FAMILIES}, not "
                f"{spec.task.family!r}"
            )
        return super().run(policy, spec, video, max_seconds)  # type: ignore[return-value]

    def _loop(
        self, policy: Policy, spec: EpisodeSpec, video: bool, limit: float
    ) -> CorrectedRollout:
        world, robot, task = self.session.world, self.session.robot, spec.task
        start, began = start_positions(world, task), world.time
        goal = task_goal(world, task)
        grasp = self.session.world.description.grasp
        self.corrector = self._corrector(task, start[task.block], grasp.grasp_offset)
        shaper = TargetShaper(self.tool, self.limits, float(FPS))
        result = CorrectedRollout(spec, False, "", 0.0, images={c: [] for c in CAMERAS})
        steps = max(1, round(1.0 / (FPS * robot.control_period)))
        done_since: float | None = None
        policy.reset()
        while world.time - began < limit:
            measured = robot.get_observation().position.astype(np.float32)
            block = world.object_pose(task.block).position
            said = self._correct(measured, block, shaper, result)
            images = {c: self.renderer.render(world.data, c) for c in CAMERAS}
            seen = {c: images[c] for c in policy.cameras}  # all are recorded
            target = np.asarray(
                policy.act(seen, shaper.policy_state(measured), spec.instruction), np.float32
            )
            executed = shaper.shape(target, measured)
            self._keep(result, images, measured, executed, target, shaper, said)
            result.environment.append(environment_state(world, task, goal))
            self._move_towards(executed, steps)
            done, result.detail = judge(world, task, start)
            done_since = (done_since if done_since is not None else world.time) if done else None
            if done_since is not None and world.time - done_since >= SUCCESS_HOLD:
                result.success = True
                break
        result.sim_seconds = world.time - began
        return result

    def _corrector(self, task, block: np.ndarray, grasp_offset: float):
        """The scripted person of ``task``'s family. A push's watches the gripper's pushing
        face (``_point``) and follows the oracle's push plan for this scene (IK only: the arm
        does not move): where that face is when the push starts."""
        self._watch = None
        if task.family != "push":
            return ScriptedCorrector(block, grasp_offset, self.settings)
        primitives = self.session.primitives
        plan = primitives.plan_push(task.block, push_target(self.session, task))
        heading = np.array(SIDE_DIRECTIONS[task.side], float)
        geoms, top = gripper_geoms(primitives.kin), object_top(primitives, task.block)
        self._watch = lambda q: face_centre(primitives.kin, geoms, q, heading, top)
        return PushCorrector(block, task.side, self._watch(plan.down[-1]), self.settings)

    def _point(self, q: np.ndarray) -> np.ndarray:
        """What the person watches at arm joints ``q``: the tool centre point, or for a push
        the centre of the gripper's pushing face."""
        return self.tool.point(q) if self._watch is None else self._watch(q)

    def _correct(
        self, measured: np.ndarray, block: np.ndarray, shaper: TargetShaper, result
    ) -> int:
        """What the corrector says this frame, handed to the shaper: its index, or -1."""
        dof = self.tool.dof
        gripper = result.action[-1][dof] if result.action else measured[dof]
        text = self.corrector.observe(self._point(measured[:dof]), gripper, block)
        if text is None:
            return NO_CORRECTION
        outcome = shaper.motion(text)
        if not outcome.applied:
            self.corrector.refused(text)
        result.corrections.append((len(result.state), text, outcome.applied))
        return len(result.corrections) - 1

    @staticmethod
    def _keep(result, images, measured, executed, target, shaper, said) -> None:
        for camera, image in images.items():
            result.images[camera].append(image)
        result.state.append(measured)
        result.action.append(executed)
        result.policy_action.append(target)
        result.residual.append(shaper.residual)
        result.correction.append(said)


def episode_record(rollout: CorrectedRollout) -> EpisodeRecord:
    """A corrected episode as the dataset writer takes it (``corrections_writer``'s columns):
    ``action`` is the executed action; ``correction_texts`` is JSON ``[[frame, text,
    applied], ...]`` and ``correction.index`` points into it (-1: nothing said)."""
    arrays, spec = rollout.arrays(), rollout.spec
    return EpisodeRecord(
        spec.instruction,
        {c: arrays[f"image.{c}"] for c in rollout.images},
        arrays["state"],
        arrays["action"],
        {
            "success": rollout.success, "family": spec.task.family, "split": spec.split,
            "seed": spec.seed, "phrasing": spec.phrasing, "combination": spec.task.combination,
            "detail": rollout.detail, "view": False, "corrections": len(rollout.corrections),
            "corrections_applied": sum(applied for _, _, applied in rollout.corrections),
            "correction_texts": json.dumps([list(c) for c in rollout.corrections]),
        },
        arrays["environment"],
        {
            POLICY_ACTION: arrays["policy_action"],
            RESIDUAL: arrays["residual"],
            CORRECTION: arrays["correction"],
        },
    )


def corrections_writer(out: Path) -> DatasetWriter:
    """A dataset writer with the corrected episodes' columns."""
    return DatasetWriter(
        Path(out),
        extra_episode_columns=EPISODE_COLUMNS,
        environment_names=ENV_NAMES,
        frame_vectors={POLICY_ACTION: STATE_NAMES, RESIDUAL: JOINT_NAMES},
        frame_indices=(CORRECTION,),
    )


def record_corrections(
    policy: Policy,
    specs: Sequence[EpisodeSpec],
    out: Path,
    settings: CorrectorSettings | None = None,
    progress: Callable[[CorrectedRollout], None] | None = None,
    start: str = "rest",
) -> list[CorrectedRollout]:
    """Run and correct every spec in this process, write them to a new dataset ``out``, and
    return the rollouts (their frames dropped once written). ``start``: where the arm is when
    each episode starts (``start_pose``)."""
    runner = CorrectedRunner(settings, start)
    return write_corrections((runner.run(policy, spec) for spec in specs), out, progress)


def write_corrections(
    rollouts: Iterable[CorrectedRollout],
    out: Path,
    progress: Callable[[CorrectedRollout], None] | None = None,
) -> list[CorrectedRollout]:
    """Write the rollouts, as they come, to a new dataset ``out``; each is shown to
    ``progress`` once written. Returns them, their frames dropped."""
    done = []
    with corrections_writer(out) as writer:
        for rollout in rollouts:
            writer.add_episode(episode_record(rollout))
            rollout.images, rollout.state, rollout.action = {}, [], []
            done.append(rollout)
            if progress is not None:
                progress(rollout)
    return done


def corrected_in_workers(
    model: str | Path,
    specs: Sequence[EpisodeSpec],
    executor: Executor,
    settings: CorrectorSettings | None = None,
    start: str = "rest",
) -> Iterator[CorrectedRollout]:
    """Every spec's corrected rollout from ``executor``'s worker processes (each loads the
    policy at ``model`` on one thread and keeps its own simulation), in ``specs``' order: the
    same rollouts whichever executor and however many workers ran them."""
    setup_args = (str(model), settings, start)
    return run_ordered(executor, _worker_state, setup_args, _corrected, list(specs), _label)


def _worker_state(model: str, settings: CorrectorSettings | None, start: str) -> tuple:
    """A worker's own policy (one torch thread) and corrected runner, made once."""
    os.environ["OMP_NUM_THREADS"] = "1"
    from lang2policy.vla.policy.runtime import VLAPolicy

    return VLAPolicy.load(model, threads=1), CorrectedRunner(settings, start)


def _corrected(state: tuple, spec: EpisodeSpec) -> CorrectedRollout:
    policy, runner = state
    return runner.run(policy, spec)


def _label(spec: EpisodeSpec) -> str:
    return f"episode {spec.index} ({spec.instruction!r})"
