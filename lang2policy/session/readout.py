"""What the simulator (or the mirror) says the scene is: object positions and in/on relations."""

from __future__ import annotations

import numpy as np

from lang2policy.session.protocol import Session


def scene_readout(session: Session) -> dict:
    """Object positions and the in/on relations that hold, from simulator state."""
    world = session.world
    positions = {
        name: [round(float(v), 4) for v in world.object_pose(name).position]
        for name in world.object_names()
    }
    relations = [f"{a} {rel} {b}" for a, rel, b in world.relations()]
    return {"positions": positions, "relations": relations}


def scene_state(world) -> tuple[dict[str, tuple[float, ...]], dict[str, float]]:
    """(positions [x, y, z], headings in degrees) of the objects on a world's table: what the
    reward planner takes (``RewardPlanner.plan``)."""
    positions = {
        n: tuple(round(float(v), 4) for v in world.object_pose(n).position) for n in world.present
    }
    headings = {n: round(float(np.rad2deg(world.object_yaw(n))), 2) for n in world.present}
    return positions, headings
