"""The scripted scenarios of ``lang2policy bench corrections``: a flawed plan, its judge and a
scripted person who sees the mistake and says the correction (see ``bench.corrections``).

``SCENARIOS`` maps each name to its objects and the function drawing one seeded ``Setup``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from lang2policy.bench.l2r_tasks import grasp_terms
from lang2policy.rewards.spec import RewardSpec
from lang2policy.scene.world import World

BIAS = 0.03  # m: how far the biased perception puts the hover point
PERSON_SPEED_LIMIT = 0.08  # m/s: what the person in the speed scenario wants
RESPONSE_STEP = 0.005  # m: a tool movement this large toward the correction is a response


# --------------------------------------------------------------------------- traces
@dataclass
class Trace:
    """The tool centre after every re-planning period of a run."""

    times: list[float] = field(default_factory=list)
    tool: list[np.ndarray] = field(default_factory=list)
    said_at: float | None = None  # when the person's correction took effect (None: never)

    def add(self, t: float, tool: np.ndarray) -> None:
        self.times.append(t)
        self.tool.append(np.array(tool, float))

    def speeds(self, since: float = -1.0) -> list[float]:
        """Tool speed averaged over each period that ends after ``since``."""
        return [
            float(
                np.linalg.norm(self.tool[i] - self.tool[i - 1])
                / (self.times[i] - self.times[i - 1])
            )
            for i in range(1, len(self.times))
            if self.times[i] > since
        ]

    def at(self, t: float) -> np.ndarray:
        """The tool position at the last sample at or before ``t`` (the first one if none)."""
        index = max([i for i, s in enumerate(self.times) if s <= t + 1e-9], default=0)
        return self.tool[index]


@dataclass(frozen=True)
class Setup:
    """One seeded instance of a scenario: the flawed plan, the judge and the scripted person."""

    instruction: str
    repeat_instruction: str  # the same request, phrased differently (memory recall)
    plan: dict  # the spec with the mistake in it
    judge: dict
    correction: str  # what the person says
    correct_at: float  # simulated seconds into the run
    sees_mistake: Callable[[Trace], bool]
    responded: Callable[[Trace, float, RewardSpec], bool]
    measure: Callable[[Trace, World], float]  # the scenario's error at the end (reported)
    extra_ok: Callable[[Trace], bool] = lambda trace: True


def _tool_xy_distance(trace: Trace, point: Sequence[float]) -> float:
    return float(np.linalg.norm(trace.tool[-1][:2] - np.asarray(point)[:2]))


# --------------------------------------------------------------------------- scenarios
_PHRASES = {
    "left": ("a bit to the left", (0.0, 1.0)),
    "right": ("a bit to the right", (0.0, -1.0)),
    "forward": ("a bit further away", (1.0, 0.0)),
    "closer": ("a bit closer", (-1.0, 0.0)),
}


def offset_scenario(world: World, rng: np.random.Generator) -> Setup:
    """Hover over a block; the perceived point is 3 cm off in a random direction."""
    target = str(rng.choice([n for n in world.present if n.endswith("block")]))
    fix = str(rng.choice(list(_PHRASES)))
    phrase, direction = _PHRASES[fix]
    true = [round(float(v), 4) for v in world.object_pose(target).position[:2]] + [0.0]
    seen = [round(true[0] - BIAS * direction[0], 4), round(true[1] - BIAS * direction[1], 4), 0.0]
    height = 0.1
    plan = {
        "task": f"hover over the {target}",
        "duration": 8,
        "terms": [
            {
                "id": "above",
                "term": "tool_above",
                "weight": 1.0,
                "params": {"point": seen, "height": height},
            }
        ],
        "success": {"all": [{"term": "above", "below": 0.015}], "hold": 1.0},
    }
    judge = {
        "terms": [
            {"id": "above", "term": "tool_above", "params": {"point": true, "height": height}}
        ],
        "success": {"all": [{"term": "above", "below": 0.015}], "hold": 1.0},
        "duration": 60,
    }
    goal = np.array([true[0], true[1], height])

    def responded(trace: Trace, since: float, spec: RewardSpec) -> bool:
        moved = trace.tool[-1][:2] - trace.at(since)[:2]
        return float(np.dot(moved, direction)) >= RESPONSE_STEP

    return Setup(
        f"hover over the {target}",
        f"hover above the {target}",
        plan,
        judge,
        phrase,
        3.0,
        sees_mistake=lambda trace: _tool_xy_distance(trace, true) > 0.015,
        responded=responded,
        measure=lambda trace, w: float(np.linalg.norm(trace.tool[-1] - goal)),
    )


def target_scenario(world: World, rng: np.random.Generator) -> Setup:
    """Lift the red block, when the person meant the blue one."""
    wrong, meant = "red block", "blue block"
    lift = {
        "id": "lift",
        "term": "object_height",
        "weight": 3.0,
        "params": {"object": wrong, "height": 0.06},
    }
    plan = {
        "task": f"lift the {wrong}",
        "duration": 8,
        "terms": [*grasp_terms(wrong), lift],
        "success": {"all": [{"term": "lift", "below": 0.02}], "hold": 0.5},
    }
    blue = [round(float(v), 4) for v in world.object_pose(meant).position]
    red = world.object_pose(wrong).position.copy()
    judge = {
        "terms": [
            {"id": "at_blue", "term": "tool_to_point", "params": {"point": blue, "axes": "xy"}}
        ],
        "success": {"all": [{"term": "at_blue", "below": 0.03}], "hold": 0.3},
        "duration": 60,
    }

    def heading_wrong(trace: Trace) -> bool:
        start, now = trace.tool[0][:2], trace.tool[-1][:2]
        progress = {
            name: np.linalg.norm(start - p[:2]) - np.linalg.norm(now - p[:2])
            for name, p in ((wrong, red), (meant, np.array(blue)))
        }
        return bool(progress[wrong] > progress[meant] + RESPONSE_STEP)  # a motion one sees

    def responded(trace: Trace, since: float, spec: RewardSpec) -> bool:
        before = np.linalg.norm(trace.at(since)[:2] - np.array(blue[:2]))
        return before - _tool_xy_distance(trace, blue) >= 0.01

    return Setup(
        f"lift the {wrong}",
        f"pick up the {wrong} and lift it",
        plan,
        judge,
        "no, the blue one",
        1.0,
        sees_mistake=heading_wrong,
        responded=responded,
        measure=lambda trace, w: _tool_xy_distance(trace, blue),
    )


def speed_scenario(world: World, rng: np.random.Generator) -> Setup:
    """Move the tool to one side at up to 0.12 m/s, when the person wants under 0.08 m/s."""
    side = str(rng.choice(["left", "right"]))
    point = [0.22, 0.15 if side == "left" else -0.15, 0.08]
    plan = {
        "task": f"move the gripper to the {side} side",
        "duration": 25,
        "terms": [
            {"id": "goal", "term": "tool_to_point", "weight": 8.0, "params": {"point": point}},
            {
                "id": "speed",
                "term": "tool_speed",
                "weight": 10.0,
                "params": {"speed": 0.12, "mode": "at_most"},
            },
        ],
        "success": {"all": [{"term": "goal", "below": 0.015}], "hold": 0.3},
    }
    judge = {
        "terms": [{"id": "goal", "term": "tool_to_point", "params": {"point": point}}],
        "success": {"all": [{"term": "goal", "below": 0.03}], "hold": 0.3},
        "duration": 60,
    }
    correct_at = 1.0

    def _settled(trace: Trace) -> float:
        """Half a second after the person said "slower" (or was due to)."""
        return (correct_at if trace.said_at is None else trace.said_at) + 0.5

    def responded(trace: Trace, since: float, spec: RewardSpec) -> bool:
        caps = [
            t.params["speed"]
            for t in spec.terms
            if t.term == "tool_speed" and t.params["mode"] == "at_most"
        ]
        return bool(caps) and trace.speeds(trace.times[-1] - 1e-6)[-1] <= 1.1 * min(caps)

    return Setup(
        f"move the gripper to the {side} side",
        f"move the gripper over to the {side}",
        plan,
        judge,
        "slower",
        correct_at,
        sees_mistake=lambda trace: (
            max(trace.speeds(correct_at - 0.5), default=0.0) > PERSON_SPEED_LIMIT
        ),
        responded=responded,
        measure=lambda trace, w: max(trace.speeds(_settled(trace)), default=0.0),
        extra_ok=lambda trace: (
            max(trace.speeds(_settled(trace)), default=0.0) <= PERSON_SPEED_LIMIT
        ),
    )


@dataclass(frozen=True)
class Scenario:
    objects: tuple[str, ...]
    make: Callable[[World, np.random.Generator], Setup]
    measure_name: str


SCENARIOS: dict[str, Scenario] = {
    "offset": Scenario(
        ("red block", "blue block", "green bowl"), offset_scenario, "final tool error (m)"
    ),
    "target": Scenario(
        ("red block", "blue block", "green bowl"), target_scenario, "tool to blue block, x-y (m)"
    ),
    "speed": Scenario(("red block",), speed_scenario, "peak tool speed after (m/s)"),
}
