"""Fast camera images of a simulated world (issue 17): a *render twin*, the same scene compiled
with the robot's meshes decimated (``scene.light_meshes``), posed from the world's joint
positions before each frame. The physics is the world's own; only drawing is lighter
(``lang2policy bench vla`` prints the render time of both).
"""

from __future__ import annotations

import mujoco
import numpy as np

from lang2policy.errors import ConfigError
from lang2policy.scene.builder import build_scene, compile_scene
from lang2policy.scene.world import World


class RenderTwin:
    """Renders ``world``'s cameras from a light copy of its model; same API as
    ``CameraRenderer.render``."""

    def __init__(self, world: World, width: int, height: int) -> None:
        pool = world.layout.pool()
        spec = build_scene(world.description, pool, light_meshes=True, realism=world.realism)
        self.model = compile_scene(spec)
        if self.model.nq != world.model.nq or self.model.ncam != world.model.ncam:
            raise ConfigError("the render twin's model does not match the world's")
        self.world = world
        self.data = mujoco.MjData(self.model)
        self.camera_names = [self.model.camera(i).name for i in range(self.model.ncam)]
        self._renderer = mujoco.Renderer(self.model, height=height, width=width)
        self._posed_at = -1.0
        self._fixed = (
            np.flatnonzero(self.model.cam_bodyid == 0),
            np.flatnonzero(self.model.light_bodyid == 0),
        )

    def sync_look(self) -> None:
        """Copy the world's lights, colours and cameras (``vla.sim.scenes.Appearance``, and a
        realism profile's look: light direction, shadows, camera error)."""
        source, target = self.world.model, self.model
        target.light_diffuse[:] = source.light_diffuse
        target.light_dir[:] = source.light_dir
        target.light_castshadow[:] = source.light_castshadow
        target.vis.headlight.diffuse[:] = source.vis.headlight.diffuse
        target.geom_rgba[:] = source.geom_rgba
        target.mat_rgba[:] = source.mat_rgba
        target.cam_pos[:] = source.cam_pos
        target.cam_quat[:] = source.cam_quat
        target.cam_fovy[:] = source.cam_fovy
        self._posed_at = -1.0  # a new look is usually a new scene: pose again

    def render(self, data: mujoco.MjData, camera: str) -> np.ndarray:
        """An RGB image of ``camera`` with the bodies where ``data`` has them."""
        if camera not in self.camera_names:
            raise ConfigError(f"unknown camera '{camera}'; the scene has {self.camera_names}")
        # The time alone does not tell scenes apart: every World.reset ends at the same time.
        if data.time != self._posed_at or not np.array_equal(self.data.qpos, data.qpos):
            self.data.qpos[:] = data.qpos
            self.data.mocap_pos[:] = data.mocap_pos  # a realism look's distractors
            self.data.mocap_quat[:] = data.mocap_quat
            self.data.time = data.time
            mujoco.mj_kinematics(self.model, self.data)
            mujoco.mj_camlight(self.model, self.data)
            self._copy_fixed_frames(data)
            self._posed_at = data.time
        self._renderer.update_scene(self.data, camera=camera)
        return self._renderer.render()

    def _copy_fixed_frames(self, data: mujoco.MjData) -> None:
        """The world's fixed cameras and lights where the world's data has them: MuJoCo places
        those at a reset, from the model as it was then (a realism look sets them before
        its reset), and a twin posing them from the model now would see another scene."""
        cams, lights = self._fixed
        self.data.cam_xpos[cams] = data.cam_xpos[cams]
        self.data.cam_xmat[cams] = data.cam_xmat[cams]
        self.data.light_xpos[lights] = data.light_xpos[lights]
        self.data.light_xdir[lights] = data.light_xdir[lights]

    def close(self) -> None:
        self._renderer.close()
