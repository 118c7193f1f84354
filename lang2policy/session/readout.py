"""What the simulator (or the mirror) says the scene is: object positions and in/on relations."""

from __future__ import annotations

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
