"""One running skill of the VLA node, without ROS (issue 18): inputs in, each control step's
decision out.

The node hands ``SkillRunner`` every camera image, joint state and object set as they arrive
(with the monotonic time of arrival) and calls ``step`` at the control rate. Each step is a
``Step``: a joint target to send, a hold with its reason, or the end of the skill. In order:

1. the skill ends ``timeout`` when its time budget (the family's ``rollout.MAX_SECONDS``, or
   ``max_seconds``; the smaller of that and the plan's ``time_budget_s``) is spent;
2. it ends ``success`` once the success check (``ObjectsJudge``: the demonstrations' judge on
   the object poses) has said "done" for ``success_hold`` s without a break, as a rollout does;
3. it holds while a joint state or a camera image is older than its timeout (or none came
   yet): state ``holding``, except for inputs not yet seen in the first ``startup_grace`` s
   (the cameras start rendering once the node subscribes), which read ``running``. An old
   image does not hold a policy that reads none (a latched network that has looked:
   ``EnsembledActor.reads_images``): on a busy machine the camera falls behind, and the arm
   would stop and start for frames the policy would not look at. After a hold the actor
   starts a fresh ensemble: chunks predicted before describe a past scene;
4. once the policy's targets stand still late enough in the budget, or the budget is nearly
   spent, without the check saying done (pick-and-place and push, when ``look_pose`` is
   given: ``look``), the arm folds up to its look pose out of the
   camera's view, and the check made from there decides: done, or ``failed`` with what it saw;
5. otherwise the policy acts; a ``PolicyBackendError`` ends the skill ``failed``. The
   ``TargetShaper`` (when given) adds the language motions' residual to the policy's target
   and applies the plan's limits (joint speed cap, workspace); ``motion`` hands it a
   correction, which acts from the next step.

``end`` ends it from outside: ``stopped`` (the safety node's stop), ``cancelled``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from lang2policy.errors import ConfigError, PolicyBackendError
from lang2policy.vla.eval.rollout import SUCCESS_HOLD
from lang2policy.vla.skill.actor import EnsembledActor, fit_image
from lang2policy.vla.skill.judge import ObjectPoses, ObjectsJudge
from lang2policy.vla.skill.language_motion import MotionOutcome
from lang2policy.vla.skill.look import FAMILIES, WATCH_S, LookToConfirm
from lang2policy.vla.skill.parse import Skill
from lang2policy.vla.skill.shaping import TargetShaper
from lang2policy.vla.spec.schema import FPS, STATE_DIM

RUNNING, HOLDING = "running", "holding"
SUCCESS, TIMEOUT, FAILED, STOPPED, CANCELLED = (
    "success", "timeout", "failed", "stopped", "cancelled",
)  # fmt: skip
FINAL_STATES = (SUCCESS, TIMEOUT, FAILED, STOPPED, CANCELLED)
LOOKING = "looking: the arm folds up out of the camera's view to check the goal"


@dataclass(frozen=True)
class RunnerSettings:
    """The control rate (Hz), input timeouts and time limits (s) of a skill."""

    rate: float = float(FPS)
    state_timeout: float = 0.5
    image_timeout: float = 0.5
    objects_timeout: float = 2.0  # older object poses cannot confirm success
    startup_grace: float = 5.0
    success_hold: float = SUCCESS_HOLD
    max_seconds: float = 0.0  # 0: the family's budget
    look_pose: tuple[float, ...] = ()  # arm joints (rad) to check the goal from; (): never

    def __post_init__(self) -> None:
        if not all(isinstance(v, float) and math.isfinite(v) for v in self.look_pose):
            raise ConfigError(f"look_pose must be finite joint angles, got {self.look_pose!r}")
        for name, value in vars(self).items():
            if name == "look_pose":
                continue
            zero_ok = name in ("max_seconds", "startup_grace", "success_hold")
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            if not ok or not math.isfinite(value) or value < 0 or (value == 0 and not zero_ok):
                bound = ">= 0" if zero_ok else "> 0"
                raise ConfigError(f"{name} must be a finite number {bound}, got {value!r}")


@dataclass(frozen=True)
class Step:
    """What to do this step: send ``target`` (float32 [6]), or hold (``target`` None);
    ``state`` says whether the skill runs, holds or ended, ``reason`` why."""

    state: str
    target: np.ndarray | None = None
    reason: str = ""

    @property
    def final(self) -> bool:
        return self.state in FINAL_STATES


class SkillRunner:
    """One skill from start to end (see the module docstring)."""

    def __init__(
        self,
        skill: Skill,
        actor: EnsembledActor,
        judge: ObjectsJudge,
        cameras: tuple[str, ...],
        settings: RunnerSettings,
        now: float,
        shaper: TargetShaper | None = None,
    ) -> None:
        self.skill, self.actor, self.judge = skill, actor, judge
        self.cameras, self.settings, self.shaper = tuple(cameras), settings, shaper
        self.started = now
        self.budget = settings.max_seconds or skill.budget
        if shaper is not None and shaper.limits.time_budget_s is not None:
            self.budget = min(self.budget, shaper.limits.time_budget_s)
        self._images: dict[str, tuple[np.ndarray, float]] = {}
        self._state: tuple[np.ndarray, float] | None = None
        self._objects_at = -math.inf
        self._done_since: float | None = None
        self.judged = "not judged yet"
        self._held = False
        self._final: Step | None = None
        self.act_seconds: list[float] = []
        self.action_times: list[float] = []
        self.held_steps = 0
        looks = settings.look_pose and skill.task.family in FAMILIES
        self.look = LookToConfirm(np.array(settings.look_pose)) if looks else None
        actor.reset()

    # ------------------------------------------------------------------ inputs
    def image(self, camera: str, rgb: np.ndarray, now: float) -> None:
        """A camera image (uint8 H x W x 3, any size) received at ``now``."""
        if camera in self.cameras:
            self._images[camera] = (rgb, now)

    def joint_state(self, position: np.ndarray, now: float) -> None:
        """The measured joints and gripper (``schema.STATE_NAMES`` order) received at ``now``."""
        position = np.asarray(position, np.float32)
        if position.shape != (STATE_DIM,) or not np.all(np.isfinite(position)):
            raise ValueError(f"a joint state needs {STATE_DIM} finite values, got {position}")
        self._state = (position, now)

    def objects(self, objects: ObjectPoses, now: float) -> None:
        """Object poses received at ``now``: the success check runs on them."""
        if self._final is not None:
            return
        done, self.judged = self.judge.check(objects)
        self._objects_at = now
        if not done:
            self._done_since = None
        elif self._done_since is None:
            self._done_since = now

    # ------------------------------------------------------------------ decisions
    @property
    def final(self) -> Step | None:
        """The skill's last step once it ended, else None."""
        return self._final

    def end(self, state: str, reason: str) -> Step:
        """End the skill (``stopped``, ``cancelled``, ...) unless it already ended."""
        if self._final is None:
            self._final = Step(state, None, reason)
        return self._final

    def motion(self, text: str) -> MotionOutcome:
        """A language motion for the rest of the run (``TargetShaper.motion``)."""
        if self.shaper is None:
            raise ConfigError("this skill runs without a TargetShaper: no language motions")
        return self.shaper.motion(text)

    def step(self, now: float) -> Step:
        """This control step's decision (see the module docstring)."""
        if self._final is not None:
            return self._final
        if now - self.started >= self.budget:
            return self.end(TIMEOUT, f"no success within {self.budget:g} s ({self.judged})")
        if now - self._objects_at > self.settings.objects_timeout:
            self._done_since = None  # success must be seen on fresh poses
        if self._done_since is not None and now - self._done_since >= self.settings.success_hold:
            return self.end(SUCCESS, f"goal reached: {self.judged}")
        waiting, stale = self._missing_inputs(now)
        if waiting or stale:
            self._held, self.held_steps = True, self.held_steps + 1
            starting = not stale and now - self.started < self.settings.startup_grace
            if starting:
                return Step(RUNNING, None, f"waiting for {', '.join(waiting)}")
            return Step(HOLDING, None, _stale_reason(waiting, stale))
        if self.look is not None and self.look.looking:
            return self._looking(now)
        return self._act(now)

    def _looking(self, now: float) -> Step:
        """On the way to the look pose, or there: ``failed`` once fresh poses seen from there
        for ``WATCH_S`` have not said done."""
        assert self.look is not None
        arrived = self.look.watched_since()
        watched = math.inf if arrived is None else arrived + WATCH_S
        if now >= watched and self._objects_at >= watched and self._done_since is None:
            return self.end(FAILED, f"goal not reached, as seen from the look pose: {self.judged}")
        return Step(RUNNING, self._look_target(now), LOOKING)

    def _look_target(self, now: float) -> np.ndarray:
        """The look's target now, under the plan's limits."""
        assert self.look is not None and self._state is not None
        target = self.look.target(now)
        if self.shaper is not None:
            target = self.shaper.limited(target, self._state[0])
        self.look.sent(target, now)
        return target

    def _act(self, now: float) -> Step:
        if self._held:
            self.actor.restart()
            if self.shaper is not None:
                self.shaper.restart()
            if self.look is not None:
                self.look.restart()
            self._held = False
        size = self.actor.image_size
        images = {c: fit_image(self._images[c][0], size) for c in self.cameras}
        state = self._state[0]
        if self.shaper is not None:  # the policy acts as if the motions had not happened
            state = self.shaper.policy_state(state)
        clock = time.perf_counter()
        try:
            target = self.actor.act(images, state, self.skill.instruction)
        except PolicyBackendError as exc:
            return self.end(FAILED, f"policy backend error: {exc}")
        self.act_seconds.append(time.perf_counter() - clock)
        self.action_times.append(now)
        look = self.look
        due = look is not None and look.due(target, now, now - self.started, self.budget)
        if look is not None and due and self._done_since is None:
            look.start(self._state[0], now)
            return Step(RUNNING, self._look_target(now), LOOKING)
        if self.shaper is not None:
            target = self.shaper.shape(target, self._state[0])
        return Step(RUNNING, target, "")

    def _missing_inputs(self, now: float) -> tuple[list[str], list[str]]:
        """(inputs never received, inputs older than their timeout), named for a person."""
        waiting, stale = [], []
        limits, looking = self.settings, self.actor.reads_images
        if self._state is None:
            waiting.append("joint states")
        elif now - self._state[1] > limits.state_timeout:
            stale.append(f"joint states (older than {limits.state_timeout:g} s)")
        for camera in self.cameras:
            if camera not in self._images:
                waiting.append(f"camera {camera}")
            elif now - self._images[camera][1] > limits.image_timeout and looking:
                stale.append(f"camera {camera} (older than {limits.image_timeout:g} s)")
        return waiting, stale

    def stats(self, now: float) -> dict[str, float | int]:
        """Steps acted and held, the achieved action rate, the policy's time per action."""
        times, acts = self.action_times, np.array(self.act_seconds) * 1000.0
        span = times[-1] - times[0] if len(times) > 1 else 0.0
        shaped = self.shaper.stats() if self.shaper is not None else {}
        return {
            "steps": len(times),
            "held_steps": self.held_steps,
            "rate_hz": round((len(times) - 1) / span, 2) if span > 0 else 0.0,
            "act_ms_mean": round(float(acts.mean()), 2) if acts.size else 0.0,
            "act_ms_p95": round(float(np.percentile(acts, 95)), 2) if acts.size else 0.0,
            "elapsed_s": round(now - self.started, 2),
            "budget_s": self.budget,
            **shaped,
        }


def _stale_reason(waiting: list[str], stale: list[str]) -> str:
    parts = [f"no {name} yet" for name in waiting] + [f"stale {name}" for name in stale]
    return "holding the arm: " + "; ".join(parts)


def state_vector(names: list[str], positions: list[float], order: tuple[str, ...]) -> np.ndarray:
    """``positions`` (by ``names``) in ``order``; ValueError naming the missing joints."""
    if len(names) != len(positions):
        raise ValueError(f"joint state has {len(names)} names but {len(positions)} positions")
    by_name: Mapping[str, float] = dict(zip(names, positions, strict=True))
    missing = [name for name in order if name not in by_name]
    if missing:
        raise ValueError(f"joint state lacks {missing}; the VLA needs {list(order)}")
    return np.array([by_name[name] for name in order], np.float32)
