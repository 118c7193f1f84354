"""Where code plans and reward specs run: in-process simulation, or the arm in the graph.

* ``SimCodeExecutor``: a ``SimSession`` (MuJoCo in this process); skill calls run to the end.
* ``LiveCodeExecutor``: a ``RemoteSession`` fed by the graph; before a plan it waits for joint
  states and objects, and a stop or a correction interrupts the motion that runs.
* ``InProcessMPC``: a reward spec optimised by a ``LockstepMPC`` on a ``SimSession``'s world; a
  follow-up's spec is swapped into the same controller (no restart).
* ``SpecHandOff`` (``spec_handoff``): a reward spec handed to the controller node, whose
  verdict it waits for.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

from lang2policy.conductor.ports import RewardRun
from lang2policy.conductor.reward_verdict import reward_verdict
from lang2policy.errors import Lang2PolicyError
from lang2policy.mpc.episode import EpisodeOutcome, LockstepMPC
from lang2policy.rewards.spec import RewardSpec
from lang2policy.session.remote import RemoteSession
from lang2policy.session.sim import SimSession
from lang2policy.skills.backend import SimSkillBackend
from lang2policy.skills.remote import RemoteSkillBackend

Line = Callable[[str], None]


class SimCodeExecutor:
    """Code plans on the simulated arm in this process; with ``vla`` the shipped VLA runs
    policy code's ``vla_skill(...)`` calls on the same arm (``vla.skill.local``)."""

    live = False

    def __init__(self, session: SimSession, vla: bool = False) -> None:
        self.session = session
        self.backend = SimSkillBackend(session)
        self.objects: list[str] = list(session.world.object_names())
        if vla:
            from lang2policy.vla.skill.local import LocalSkillRunner  # torch: only when asked

            self.backend.vla = LocalSkillRunner(session)

    def reset(self, seed: int, objects: list[str] | None = None) -> list[str]:
        """A new seeded scene; returns the objects on the table."""
        self.objects = self.session.reset(seed, objects)
        return self.objects

    def object_names(self) -> list[str]:
        return list(self.objects)

    def prepare(self) -> None:
        """Nothing to wait for: the simulation is here."""

    def finish(self) -> None:
        """Nothing to bring in step: the simulated world is the truth."""

    def current_call(self) -> tuple[str, dict] | None:
        return None  # skill calls run to their end in-process; nothing to edit mid-motion

    def abort(self, reason: str) -> None:
        """In-process motions run to their end; the runner ends the plan at its next call."""

    def interrupt_for_edit(self) -> None:
        """See ``abort``: edits take effect from the next call."""


class LiveCodeExecutor:
    """Code plans on the arm in the graph, through a ``RemoteSession``."""

    live = True

    def __init__(self, session: RemoteSession, wait_for_scene: float, objects_topic: str) -> None:
        self.session = session
        self.backend = RemoteSkillBackend(session)
        self.wait_for_scene = wait_for_scene
        self.objects_topic = objects_topic

    def object_names(self) -> list[str]:
        return list(self.session.object_snapshot())

    def prepare(self) -> None:
        """Fresh state and the scene heard, or a clear error that says what is missing."""
        robot = self.session.robot
        robot.clear_interrupt()
        robot.wait_for_state(self.wait_for_scene)
        if not robot.is_connected:
            robot.connect()
        wait_until(lambda: bool(self.session.object_snapshot()), self.wait_for_scene)
        if not self.session.object_snapshot():
            raise Lang2PolicyError(
                f"no objects heard on {self.objects_topic} within {self.wait_for_scene:g} s; "
                "is the perception node running?"
            )
        self.session.sync()

    def finish(self) -> None:
        self.session.sync()

    def current_call(self) -> tuple[str, dict] | None:
        return self.backend.current_call

    def abort(self, reason: str) -> None:
        self.backend.abort(reason)

    def interrupt_for_edit(self) -> None:
        self.backend.interrupt_for_edit()


class InProcessMPC:
    """Reward specs optimised on a ``SimSession``'s world by one ``LockstepMPC``.

    ``duration`` caps each spec (simulated seconds); ``on_step`` sees the controller after
    each MPC step (a video recorder captures frames there)."""

    def __init__(
        self,
        session: SimSession,
        *,
        seed: int = 0,
        duration: float | None = None,
        on_step: Callable | None = None,
    ) -> None:
        from lang2policy.mpc.sampler import MPCConfig

        self.session = session
        self.config = MPCConfig(seed=seed, samples=128)
        self.duration, self.on_step = duration, on_step
        self.mpc: LockstepMPC | None = None

    @property
    def running_spec(self) -> RewardSpec | None:
        return None if self.mpc is None else self.mpc.spec

    def run(self, spec: RewardSpec, on_line: Line) -> RewardRun:
        spec = capped(spec, self.duration)
        if self.mpc is None:
            self.mpc = LockstepMPC(self.session.world, spec, self.config)
        else:
            self.mpc.set_spec(spec)  # the same controller: no restart
        before = self.mpc.iterations
        outcome = self.mpc.run(on_step=self.on_step)
        outcome.iterations -= before  # this spec's
        on_line(f"{outcome.status} after {outcome.sim_seconds:.1f} s simulated")
        ok, verdict = reward_verdict(
            spec, outcome.status, outcome.reason, outcome.final, outcome.sim_seconds
        )
        return RewardRun(ok, {**verdict, "outcome": outcome_dict(outcome)})

    def cancel(self) -> None:
        self.close()

    def close(self) -> None:
        if self.mpc is not None:
            self.mpc.close()
            self.mpc = None


def wait_until(predicate: Callable[[], bool], timeout: float, step: float = 0.05) -> bool:
    """Poll ``predicate`` until it holds or ``timeout`` s pass; returns the last answer."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            return False
        time.sleep(step)
    return True


def capped(spec: RewardSpec, duration: float | None) -> RewardSpec:
    """``spec`` with its duration cut to ``duration`` seconds (when given and shorter)."""
    if duration is None or duration >= spec.duration:
        return spec
    return dataclasses.replace(spec, duration=duration)


def outcome_dict(outcome: EpisodeOutcome) -> dict[str, Any]:
    """The MPC's outcome of one spec, JSON-able."""
    return {
        "status": outcome.status,
        "sim_seconds": round(outcome.sim_seconds, 3),
        "iterations": outcome.iterations,
        "mpc_plan_ms": round(outcome.plan_ms, 1),  # mean per iteration over the run so far
        "final": {k: round(v, 4) for k, v in outcome.final.items()},
        "reason": outcome.reason,
    }
