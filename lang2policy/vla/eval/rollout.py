"""Closed-loop episodes of a VLA policy in simulation (issue 17): what training's periodic
evaluation, ``lang2policy bench vla`` and the tests run.

Every ``1 / FPS`` s of simulated time the policy sees the cameras (``frames`` resolution,
the render twin), the measured state and the instruction, and answers a joint target; the
arm is sent towards it in equal steps over the control periods until the next frame (the
robot's own limits clamp every step, as for any command). The episode ends when the task has
been done (``judge``) for ``SUCCESS_HOLD`` s, or after the family's ``MAX_SECONDS``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from lang2policy.errors import Lang2PolicyError
from lang2policy.session.sim import SimSession
from lang2policy.vla.eval.start_pose import check_start, move_to_start
from lang2policy.vla.model.grounding import draw_grounding
from lang2policy.vla.sim.environment_state import environment_state, task_goal
from lang2policy.vla.sim.episodes import EpisodeSpec, set_up_scene
from lang2policy.vla.sim.frames import frame_renderer, sensor_frame
from lang2policy.vla.sim.judge import judge, start_positions
from lang2policy.vla.sim.oracle import run_oracle
from lang2policy.vla.spec.schema import CAMERAS, FPS
from lang2policy.vla.spec.tasks import FAMILIES, sample_task, seen_phrasings, unseen_phrasings

SUCCESS_HOLD = 1.0  # s the task must stay done
MAX_SECONDS = {"pick_place": 30.0, "push": 20.0, "lift": 20.0}


class Policy(Protocol):
    def reset(self) -> None: ...

    def act(self, images: dict[str, np.ndarray], state: np.ndarray, instruction: str) -> np.ndarray:
        ...


@dataclass
class Rollout:
    """One closed-loop episode: the verdict, how long, and the policy's time per action."""

    spec: EpisodeSpec
    success: bool
    detail: str
    sim_seconds: float
    act_seconds: list[float] = field(default_factory=list)
    video: list[np.ndarray] = field(default_factory=list)  # front frames, when asked for
    # per step, how far the policy's own scene estimate put the named block (mm, x y z), when
    # it has a scene head: its perception, measured in closed loop
    block_errors_mm: list[np.ndarray] = field(default_factory=list)


class RolloutRunner:
    """A simulation and a renderer, kept for many episodes (building them takes seconds)."""

    def __init__(
        self, video_size: int = 0, true_scene: bool = False, start: str = "rest", realism=None
    ) -> None:
        """``true_scene`` (diagnosis): the policy's action head reads the true scene state.
        ``start``: where the arm is when each episode starts (``start_pose.STARTS``).
        ``realism``: a ``realism.RealismProfile`` for the world's looks and the cameras'
        sensor (None: as modelled)."""
        self.true_scene = true_scene
        self.start = check_start(start)
        self.session = SimSession("so101", realism=realism)
        self.renderer = frame_renderer(self.session.world)
        self.video_renderer = frame_renderer(self.session.world, video_size) if video_size else None

    def run(
        self, policy: Policy, spec: EpisodeSpec, video: bool = False, max_seconds: float = 0.0
    ) -> Rollout:
        """Run ``policy`` on ``spec``'s scene until the task is done or time is up (the
        family's ``MAX_SECONDS``, or ``max_seconds`` when given)."""
        session, robot = self.session, self.session.robot
        appearance = set_up_scene(session, spec)
        for renderer in filter(None, (self.renderer, self.video_renderer)):
            renderer.sync_look()
        try:
            move_to_start(session, spec.seed, self.start)
            limit = max_seconds or MAX_SECONDS[spec.task.family]
            return self._loop(policy, spec, video, limit)
        finally:
            appearance.restore(session.world)
            robot.forget_last_command()

    def _loop(self, policy: Policy, spec: EpisodeSpec, video: bool, limit: float) -> Rollout:
        world, robot = self.session.world, self.session.robot
        start, began = start_positions(world, spec.task), world.time
        goal = task_goal(world, spec.task)
        result = Rollout(spec, False, "", 0.0)
        steps = max(1, round(1.0 / (FPS * robot.control_period)))
        done_since: float | None = None
        policy.reset()
        first_scene: np.ndarray | None = None
        cameras = getattr(policy, "cameras", CAMERAS)  # only what the policy reads is rendered
        frame = 0
        while world.time - began < limit:
            images = {c: self._sensor(self.renderer.render(world.data, c), frame) for c in cameras}
            frame += 1
            if video and self.video_renderer is not None:
                result.video.append(self.video_renderer.render(world.data, "front"))
            state = robot.get_observation().position
            scene = environment_state(world, spec.task, goal)
            truth = {"scene": scene} if self.true_scene else {}
            clock = time.perf_counter()
            target = np.asarray(policy.act(images, state, spec.instruction, **truth), float)
            result.act_seconds.append(time.perf_counter() - clock)
            first_scene = scene if first_scene is None else first_scene
            held = getattr(policy, "holds_scene", False)  # its estimate is of the first frame
            self._note_perception(policy, first_scene if held else scene, result)
            self._move_towards(target, steps)
            done, result.detail = judge(world, spec.task, start)
            done_since = (done_since if done_since is not None else world.time) if done else None
            if done_since is not None and world.time - done_since >= SUCCESS_HOLD:
                result.success = True
                break
        result.sim_seconds = world.time - began
        return result

    def _sensor(self, rgb: np.ndarray, frame: int) -> np.ndarray:
        return sensor_frame(self.session.world, rgb, frame)

    @staticmethod
    def _note_perception(policy: Policy, scene: np.ndarray, result: Rollout) -> None:
        """The policy's estimate of the named block against the truth, and on the video
        where it sees the block and the goal (policies that expose them)."""
        estimate = getattr(policy, "last_scene", None)
        if estimate is not None:
            result.block_errors_mm.append(1000.0 * np.abs(estimate[:3] - scene[:3]))
        seen = getattr(policy, "last_grounded", None)
        if result.video and seen is not None:
            result.video[-1] = draw_grounding(result.video[-1], seen)

    def _move_towards(self, target: np.ndarray, steps: int) -> None:
        robot = self.session.robot
        last = robot.last_command
        origin = robot.get_observation().position if last is None else last
        for fraction in np.arange(1, steps + 1) / steps:
            robot.send_action(origin + fraction * (target - origin))
            robot.sleep(robot.control_period)

    def oracle(self, spec: EpisodeSpec) -> tuple[bool, str]:
        """The scripted oracle on ``spec``'s scene (the benchmark's reference): (done, why)."""
        session = self.session
        appearance = set_up_scene(session, spec)
        try:
            move_to_start(session, spec.seed, self.start)
            start = start_positions(session.world, spec.task)
            try:
                run_oracle(session, spec.task)
            except Lang2PolicyError as exc:
                return False, f"oracle: {type(exc).__name__}: {exc}"
            return judge(session.world, spec.task, start)
        finally:
            appearance.restore(session.world)
            session.robot.forget_last_command()


# ----------------------------------------------------------------- evaluation episodes
SPLITS = ("seen", "unseen combination", "unseen phrasing")
EVAL_SEED_BASE = 2**30  # training seeds are below it (demos.training_specs)


def evaluation_specs(
    families: tuple[str, ...], per_split: int, seed: int, splits: tuple[str, ...] = SPLITS
) -> list[EpisodeSpec]:
    """``per_split`` episodes per family and split, on layouts no training episode used."""
    rng = np.random.default_rng(seed)
    specs: list[EpisodeSpec] = []
    for family in families:
        for split in splits:
            phrasings = list(
                unseen_phrasings(family) if split == "unseen phrasing" else seen_phrasings(family)
            )
            for number in range(per_split):
                task = sample_task(rng, family, seen=split != "unseen combination")
                seed_ = EVAL_SEED_BASE + int(rng.integers(2**30))
                phrasing = phrasings[number % len(phrasings)]
                specs.append(EpisodeSpec(len(specs), task, phrasing, seed_, split))
    return specs


_RUNNER: RolloutRunner | None = None


def evaluate_policy(
    policy: Policy, per_family: int = 4, seed: int = 7, families: tuple[str, ...] = FAMILIES
) -> dict:
    """Success of ``policy`` on ``per_family`` seen-split episodes per family (training's
    periodic check): ``{"success": rate, "per_family": {family: rate}, "episodes": n}``."""
    global _RUNNER
    _RUNNER = _RUNNER or RolloutRunner()
    specs = evaluation_specs(families, per_family, seed, splits=("seen",))
    results = [_RUNNER.run(policy, spec) for spec in specs]
    per_family = {
        f: float(np.mean([r.success for r in results if r.spec.task.family == f]))
        for f in families
    }
    return {
        "success": float(np.mean([r.success for r in results])),
        "per_family": per_family,
        "episodes": len(results),
    }
