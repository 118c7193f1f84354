"""Keep-out zones see the gripper's geometry, not only the tool centre point (issue 13, finding 4).

The privilege policy judges a motion by points computed before it runs. On the SO-101 the
open moving jaw reaches 8 cm past the tool centre point, so a call whose tool point stays
outside a keep-out zone can still put the jaw in it. These tests run real calls through the
real ``SandboxRunner`` on the simulated arm, with the default policy narrowed by
config/policies/examples/keep_out.yaml (a person works at y > 0.10 m), and measure after every
physics step how far the gripper's geometry reaches: every vertex of the convex hull of each of
its meshes, and the box corners of its other geoms, placed by forward kinematics.
"""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
import yaml

from lang2policy.paths import config_dir
from lang2policy.sandbox.policy import PrivilegePolicy, default_policy, workspace_box
from lang2policy.sandbox.runner import SandboxLimits, SandboxRunner
from lang2policy.scene.world import World
from lang2policy.session.sim import SimSession
from lang2policy.skills.backend import SimSkillBackend
from lang2policy.skills.catalog import SKILLS

OBJECTS = ["red block", "green block", "blue bowl", "green bowl"]
SEED = 3  # SO-101: green block at (0.25, -0.03), blue bowl at (0.20, -0.10); arm at home
EDGE = 0.10  # keep_out.yaml's zone person_side: y > 0.10 m
KEEP_OUT = config_dir() / "policies" / "examples" / "keep_out.yaml"
LIMITS = SandboxLimits(wall_seconds=60, cpu_seconds=10, memory_mb=512)
# (robot, zone edge y, move_to target) from the scene's start (found by a grid search over
# x, y, z near the zone): the tool centre point stays 1-7 cm outside the zone; the SO-101's
# open moving jaw goes about 3 cm into it, the Panda's hand (20 cm across) about 3 cm. The
# Panda's edge is further out: at home its hand already reaches y = 0.104.
INTO_ZONE = [("so101", EDGE, [0.15, 0.09, 0.04]), ("panda", 0.15, [0.5, 0.08, 0.25])]


def _shape_points(model: mujoco.MjModel, geom: int) -> np.ndarray:
    """Points (geom frame) whose convex hull holds the geom: a mesh's convex hull vertices
    (MuJoCo's own hull, in ``mesh_graph``), else the corners of the geom's bounding box."""
    if model.geom_type[geom] == mujoco.mjtGeom.mjGEOM_MESH:
        mesh = model.geom_dataid[geom]
        start, count = model.mesh_vertadr[mesh], model.mesh_vertnum[mesh]
        vertices = model.mesh_vert[start : start + count]
        graph = model.mesh_graphadr[mesh]
        if graph < 0:
            return vertices.copy()
        hull_count = model.mesh_graph[graph]
        ids = model.mesh_graph[graph + 2 + hull_count : graph + 2 + 2 * hull_count]
        return vertices[ids].copy()
    centre, half = model.geom_aabb[geom, :3], model.geom_aabb[geom, 3:]
    signs = np.array([[i, j, k] for i in (-1, 1) for j in (-1, 1) for k in (-1, 1)], float)
    return centre + half * signs


class GripperProbe:
    """After every physics step of ``world``, the largest world y of the gripper's geometry
    (the body holding the ee site and every body below it) and of the tool centre point.

    ``World.step`` is wrapped to step one physics step at a time (what ``mj_step`` with a
    count does) and measure on a private ``MjData`` copy of the state."""

    def __init__(self, world: World) -> None:
        self.world, model = world, world.model
        root = int(model.site_bodyid[world.arm.ee_site_id])
        seen, self.shapes = set(), []
        for geom in range(model.ngeom):
            body = int(model.geom_bodyid[geom])
            while body not in (0, root):
                body = int(model.body_parentid[body])
            key = (
                int(model.geom_bodyid[geom]),
                int(model.geom_dataid[geom]),
                *model.geom_pos[geom].round(6),
                *model.geom_quat[geom].round(6),
            )
            if body == root and key not in seen:  # visual and collision copies: once
                seen.add(key)
                self.shapes.append((geom, _shape_points(model, geom)))
        self.offset = np.array(world.description.grasp.center_offset, float)
        self.data = mujoco.MjData(model)
        self.gripper_y: list[float] = []
        self.tool_y: list[float] = []
        self._step = world.step
        world.step = self._stepping  # an instance attribute over the method; close() removes it

    def _stepping(self, nstep: int = 1) -> None:
        for _ in range(nstep):
            self._step(1)
            self._measure()

    def _measure(self) -> None:
        model, data = self.world.model, self.data
        data.qpos[:] = self.world.data.qpos
        mujoco.mj_kinematics(model, data)
        self.gripper_y.append(
            max(
                float((points @ data.geom_xmat[g].reshape(3, 3)[1]).max() + data.geom_xpos[g][1])
                for g, points in self.shapes
            )
        )
        site = self.world.arm.ee_site_id
        tool = data.site_xpos[site] + data.site_xmat[site].reshape(3, 3) @ self.offset
        self.tool_y.append(float(tool[1]))

    def peak(self, first: int = 0) -> tuple[float, float]:
        """(largest gripper y, largest tool y) over the steps from ``first`` on."""
        return max(self.gripper_y[first:], default=-1.0), max(self.tool_y[first:], default=-1.0)

    def close(self) -> None:
        del self.world.step


_SESSIONS: dict[str, SimSession] = {}


def session_for(robot: str) -> SimSession:
    """One simulated session per arm for the module, reset to the scene."""
    if robot not in _SESSIONS:
        _SESSIONS[robot] = SimSession(robot)
    _SESSIONS[robot].reset(SEED, OBJECTS)
    return _SESSIONS[robot]


@pytest.fixture
def fresh_session():
    return session_for("so101")


@pytest.fixture
def probe(fresh_session):
    probe = GripperProbe(fresh_session.world)
    yield probe
    probe.close()


def keep_out_policy(fresh_session: SimSession, edge: float = EDGE) -> PrivilegePolicy:
    """The default policy narrowed by keep_out.yaml (its zone from y = ``edge`` on)."""
    description = fresh_session.world.description
    base = default_policy(description, known_skills=SKILLS)
    plan = yaml.safe_load(KEEP_OUT.read_text())
    plan["zones"]["person_side"]["min"][1] = edge
    workspace = workspace_box(description)
    return base.narrowed(PrivilegePolicy.from_dict(plan, workspace, KEEP_OUT.name, SKILLS))


def run(fresh_session: SimSession, program: str, policy: PrivilegePolicy | None = None):
    policy = policy or keep_out_policy(fresh_session)
    return SandboxRunner(SimSkillBackend(fresh_session), policy, limits=LIMITS).run(program)


def assert_refused_or_outside(outcome, probe: GripperProbe, skill: str, edge: float = EDGE):
    """The call of ``skill`` was refused by the keep-out rule, or else the gripper's geometry
    never entered the zone y > ``edge``."""
    gripper, tool = probe.peak()
    call = next(i for i in outcome.intents if i.skill == skill)
    if call.decision == "allowed":
        assert gripper <= edge, (
            f"{skill} was allowed (tool centre point up to y = {tool:.3f}) and the gripper's "
            f"geometry went {(gripper - edge) * 100:.1f} cm into the keep-out zone y > {edge}"
        )
    else:
        assert call.rule == "keep-out", (call.decision, call.rule, call.reason)
        assert outcome.kind == "stopped", outcome.summary()  # keep_out.yaml: fallback stop
        assert "person" in call.reason
        assert gripper <= edge


@pytest.mark.parametrize(("robot", "edge", "target"), INTO_ZONE)
def test_a_move_that_would_put_the_gripper_into_a_keep_out_zone_is_refused(robot, edge, target):
    session = session_for(robot)
    probe = GripperProbe(session.world)
    try:
        outcome = run(session, f"move_to({target}, speed=0.1)", keep_out_policy(session, edge))
        assert_refused_or_outside(outcome, probe, "move_to", edge)
        # Not vacuous: without the zone the same move does put the gripper > 1 cm into it,
        # while the tool centre point stays outside.
        session.reset(SEED, OBJECTS)
        first = len(probe.gripper_y)
        base = default_policy(session.world.description, known_skills=SKILLS)
        outcome = run(session, f"move_to({target}, speed=0.1)", base)
        assert outcome.ok, outcome.summary()
        gripper, tool = probe.peak(first)
        assert tool <= edge - 0.005 and gripper > edge + 0.01, (tool, gripper)
    finally:
        probe.close()


def test_placing_beside_a_keep_out_zone_is_refused_when_the_jaw_would_reach_in(
    fresh_session, probe
):
    """A compound motion (wrist yaw and tilt decided while it runs): the pick far from the zone
    is allowed; placing the block with its centre 4 cm from the zone would open the jaw into it."""
    program = 'pick("green block", speed=0.1)\nplace([0.2, 0.06, 0.0], speed=0.1)\n'
    outcome = run(fresh_session, program)
    assert outcome.intents[0].ok, outcome.summary()
    assert_refused_or_outside(outcome, probe, "place")


def test_moves_and_a_pick_and_place_away_from_the_zone_are_allowed(fresh_session, probe):
    """No refusals near normal work: moves and a pick-and-place a few cm from the zone."""
    program = """
move_to([0.25, -0.05, 0.12], speed=0.1)
move_to([0.22, 0.0, 0.10], speed=0.1)
put_first_on_second("green block", "blue bowl", speed=0.1)
"""
    outcome = run(fresh_session, program)
    assert outcome.ok, outcome.summary()
    assert [i.decision for i in outcome.intents] == ["allowed"] * 3
    fresh_session.world.step_seconds(0.5)
    assert fresh_session.world.is_in("green block", "blue bowl")
    assert probe.peak()[0] <= EDGE
