"""The sim node shows a VLA evaluation episode's scene exactly (``bench vla --graph``): its
``seed``, ``objects`` and ``appearance`` parameters, set from the layout ``set_up_scene`` drew
for an evaluation spec, give the same object poses, the same look on the model (lights,
colours, front camera) and the same camera image as the standalone bench's simulation. And a
look that is not one is refused, saying which field is wrong.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")

from lang2policy.errors import ConfigError
from lang2policy.scene.render import CameraRenderer
from lang2policy.session.sim import SimSession
from lang2policy.vla.eval.rollout import evaluation_specs
from lang2policy.vla.sim.episodes import set_up_scene
from lang2policy.vla.sim.scenes import Appearance

LOOK_ARRAYS = ("light_diffuse", "geom_rgba", "cam_pos", "mat_rgba")


@pytest.fixture(scope="module")
def episode():
    """A standalone episode's scene (the push spec: a layout where the oracle's check ran),
    its parameters for the sim node, and its look; the model's own look restored after."""
    spec = next(s for s in evaluation_specs(("push",), 1, seed=3) if s.split == "seen")
    session = SimSession("so101")
    own = {name: getattr(session.world.model, name).copy() for name in LOOK_ARRAYS}
    appearance = set_up_scene(session, spec)
    params = {
        "seed": int(session.world.seed),
        "objects": ",".join(session.world.present),
        "appearance": json.dumps(appearance.to_dict(session.world)),
    }
    yield session, params, own
    appearance.restore(session.world)


def look(world) -> dict[str, np.ndarray]:
    return {name: getattr(world.model, name).copy() for name in LOOK_ARRAYS}


def test_a_look_survives_the_round_trip_and_bad_ones_are_refused(episode):
    session, params, own = episode
    data = json.loads(params["appearance"])
    rebuilt = Appearance.from_dict(data, session.world)
    shown = look(session.world)
    assert any(not np.array_equal(shown[k], own[k]) for k in LOOK_ARRAYS)  # a look was applied
    rebuilt.apply(session.world)  # on top of the same look: applied twice, so compare below
    twice = look(session.world)
    rebuilt.restore(session.world)
    assert all(np.array_equal(look(session.world)[k], shown[k]) for k in LOOK_ARRAYS)
    assert not np.array_equal(twice["cam_pos"], shown["cam_pos"])  # it does act
    for broken, message in (
        ({**data, "light_scale": [1.0]}, "'light_scale' must be 2 finite numbers"),
        ({**data, "camera_shift": [0.0, float("nan"), 0.0]}, "'camera_shift' must be 3 finite"),
        ({k: v for k, v in data.items() if k != "table_shift"}, "exactly the fields"),
        ({**data, "object_shift": {"0": [0.1, 0.0, 0.0]}}, "maps object geom ids"),
    ):
        with pytest.raises(ConfigError, match=message):
            Appearance.from_dict(broken, session.world)


@pytest.mark.ros
def test_the_sim_node_shows_the_episode_scene_exactly(episode):
    rclpy = pytest.importorskip("rclpy")
    from rclpy.parameter import Parameter

    from lang2policy.ros.sim_node import SimNode

    session, params, own = episode
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        overrides = [Parameter(k, value=v) for k, v in params.items()]
        sim = SimNode(context=context, parameter_overrides=[*overrides, Parameter(
            "camera_rate", value=0.0)])  # fmt: skip
        try:
            assert sim.objects == session.world.present
            for name in session.world.present:
                ours = sim.world.object_pose(name)
                theirs = session.world.object_pose(name)
                assert np.allclose(ours.position, theirs.position, atol=1e-9), name
                assert np.allclose(ours.quat, theirs.quat, atol=1e-9), name
            node_look, episode_look = look(sim.world), look(session.world)
            for name in LOOK_ARRAYS:
                assert np.array_equal(node_look[name], episode_look[name]), name
            assert not np.array_equal(node_look["light_diffuse"], own["light_diffuse"])
            images = []
            for world in (sim.world, session.world):
                renderer = CameraRenderer(world.model, 96, 96)
                images.append(renderer.render(world.data, "front").astype(int))
                renderer.close()
            assert np.abs(images[0] - images[1]).max() <= 1
        finally:
            sim.destroy_node()
        bad = [*overrides[:2], Parameter("appearance", value='{"light_scale": [1, 2]}')]
        with pytest.raises(ConfigError, match="parameter 'appearance': an appearance has"):
            SimNode(context=context, parameter_overrides=bad)
        for text in ("[1, 2]", "3", '"bright"', "null"):  # JSON, but not an object
            bad = [*overrides[:2], Parameter("appearance", value=text)]
            with pytest.raises(ConfigError, match=r"exactly the fields .* \(a JSON object\); got"):
                SimNode(context=context, parameter_overrides=bad)
    finally:
        rclpy.shutdown(context=context)


def test_a_wrong_object_shift_names_this_scenes_geom_ids_in_number_order(episode):
    """The allowed geom ids are said as a numeric range (they were compared as text, which
    gave "100..99" on a scene whose object geoms are 38..217)."""
    session, params, _ = episode
    data = dict(json.loads(params["appearance"]), object_shift={"1": [0.0, 0.0, 0.0]})
    with pytest.raises(ConfigError) as caught:
        Appearance.from_dict(data, session.world)
    low, high = str(caught.value).split("of this scene: ")[1].split(")")[0].split("..")
    assert int(low) < int(high), str(caught.value)
