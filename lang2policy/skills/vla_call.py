"""What the rest of the stack needs to know about a VLA skill call, without the VLA itself.

A VLA skill ("lift the red block") is run by a learned policy, on its own, for up to its time
budget; the privilege gate checks it before it starts like any other motion (``sandbox.
skill_gate``), from the objects the skill text names and where they are. ``named_objects``
finds those names in the text the way the VLA's phrasings spell them (a colour and ``block``
or ``bowl``), whether or not such an object is on the table, so that the gate can refuse a
skill about an object that is not there.

``VLARunner`` is the hook a skill backend runs ``vla_skill(...)`` calls with: the graph's
skill route (the VLA node, through the planner node) or the shipped policy in this process.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from lang2policy.errors import InvalidIntentError
from lang2policy.scene.objects import COLORS, KINDS
from lang2policy.scene.world import World
from lang2policy.skills.spec import Skill

VLA_SKILL = "vla_skill"  # the skill name in the catalog, the policy files and requests
_COLOURS = "|".join(sorted(COLORS, key=len, reverse=True))
_NAMED = re.compile(rf"\b({_COLOURS})\s+({'|'.join(KINDS)})s?\b", re.IGNORECASE)


def named_objects(text: str) -> tuple[str, ...]:
    """The objects ``text`` names ("red block", "blue bowl"), in order, each once."""
    found = (f"{m.group(1).lower()} {m.group(2).lower()}" for m in _NAMED.finditer(str(text)))
    return tuple(dict.fromkeys(found))


def call_objects(skill: Skill, bound: dict) -> tuple[str, ...]:
    """The objects a call refers to, for the privilege policy: its object arguments, and for
    ``vla_skill`` the objects its instruction names (its one argument is free text)."""
    if skill.name == VLA_SKILL:
        return named_objects(bound["instruction"])
    return tuple(skill.object_args(bound))


def object_target(position) -> tuple[float, float, float]:
    """Where the tool reaches an object a VLA skill names, for the gate: its x, y at its centre
    height, never below the table top (a bowl's origin sits on the table, a hair below z = 0
    in simulation)."""
    x, y, z = (float(v) for v in position[:3])
    return (x, y, max(z, 0.0))


class VLARunner(Protocol):
    """Runs one gated VLA skill call to its end: ``args`` are the bound arguments of
    ``vla_skill`` (``instruction``, ``time_budget_s``, ``max_joint_speed``) and, when the gate
    decided one, ``workspace`` (the tool's box, see ``run_vla``); True when the
    skill's success check held. Raises ``Lang2PolicyError`` when it cannot run at all."""

    def __call__(self, args: dict) -> bool: ...


def vla_targets(world: World, bound: dict) -> list[np.ndarray]:
    """The privilege policy's targets of ``vla_skill(**bound)``: the positions of the objects
    its instruction names that are in ``world`` (the gate checks the others are there)."""
    present = set(world.object_names())
    named = named_objects(bound["instruction"])
    positions = [object_target(world.object_pose(n).position) for n in named if n in present]
    return [np.asarray(p, float) for p in positions]


def run_vla(
    runner: VLARunner | None,
    bound: dict,
    hold: Callable[[], None],
    time_limit: float | None = None,
    workspace: Any = None,
    resume: Callable[[], None] | None = None,
) -> bool:
    """Run an allowed ``vla_skill`` call on ``runner``; without one, a clear error. The arm
    is told to hold after a skill that could not run. ``time_limit`` (s: what is left of the
    plan's motion budget) cuts the call's ``time_budget_s``: the policy acts on its own for
    its whole budget, so nothing else would keep it within the plan's. ``workspace`` (the
    box the privilege gate decided, a ``policy_zones.Box``) goes to the runner as
    ``args["workspace"]``: the tool's box while the policy acts. ``resume`` runs when the
    call ends, however it ends (before the hold): the policy moved the arm, so the motions
    after it must start from the measured state (``MotionPrimitives.resume_from_measured``)."""
    if runner is None:
        raise InvalidIntentError(
            f"{VLA_SKILL}(): no VLA policy runs here (start the graph with vla:=true); "
            "use the other skills"
        )
    args = dict(bound)
    if time_limit is not None:
        args["time_budget_s"] = min(float(args["time_budget_s"]), float(time_limit))
    if workspace is not None:
        args["workspace"] = workspace
    try:
        return bool(runner(args))
    except BaseException:
        if resume is not None:
            resume()
        hold()
        raise
    finally:
        if resume is not None:
            resume()
