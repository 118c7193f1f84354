"""The values the privilege policy exchanges with its caller: request, decision, budgets.

Kept apart from the rule logic so the sandbox runner (and the tests) can build requests and read
decisions without pulling in the YAML parser or the narrowing analysis.
"""

from __future__ import annotations

from dataclasses import dataclass

# What the runner does with a denied call: raise an error inside the policy code ("error"),
# ask the person before going on ("ask"), or stop the whole program ("stop").
FALLBACKS = ("error", "ask", "stop")
EFFECTS = ("allow", "forbid")
CATEGORIES = ("query", "motion", "speech")
DEFAULT_DENY = "default-deny"


@dataclass(frozen=True)
class PolicyRequest:
    """One skill call, as the policy sees it before anything runs.

    ``args`` are the fully bound arguments (defaults filled in, so an omitted argument is checked
    like a given one); ``targets`` are the points the tool centre point will pass through (its
    path, sampled); ``sweep`` are further points the rest of the gripper will pass through, so
    keep-out zones (``targets_any_in``) see the whole gripper while workspace containment
    (``targets_in``) is about the tool; ``objects`` the scene object names the call refers to;
    ``scene_objects`` the names present in the scene.
    """

    skill: str
    category: str
    args: dict
    targets: tuple[tuple[float, float, float], ...] = ()
    objects: tuple[str, ...] = ()
    scene_objects: tuple[str, ...] = ()
    sweep: tuple[tuple[float, float, float], ...] = ()

    @property
    def all_points(self) -> tuple[tuple[float, float, float], ...]:
        """Every point any part of the gripper passes through: targets and sweep."""
        return self.targets + self.sweep


@dataclass(frozen=True)
class Decision:
    """The verdict on one request; ``fallback`` says what to do when it is a denial."""

    allowed: bool
    rule: str  # id of the deciding rule, or "default-deny"
    reason: str
    fallback: str = "error"

    def __post_init__(self) -> None:
        if self.fallback not in FALLBACKS:
            raise ValueError(f"fallback must be one of {list(FALLBACKS)}, got {self.fallback!r}")


@dataclass(frozen=True)
class Budgets:
    """Limits over one whole program run: skill calls made, seconds of robot motion."""

    max_skill_calls: int = 200
    max_motion_seconds: float = 120.0
