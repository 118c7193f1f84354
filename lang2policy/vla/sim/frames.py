"""Frames of an episode in simulation, as ``schema`` defines them (issue 17): camera images,
the measured state and the commanded action, taken every ``1 / FPS`` s of simulated time.

``FrameRecorder`` is called after every control period (a ``SimRobot`` observer); when a
frame is due it renders the cameras and reads the state. The action of frame ``i`` is the
command in force when frame ``i + 1`` is taken: the last target the arm was sent towards in
the period between them (the last frame's is its own command).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from lang2policy.robots.sim_robot import SimRobot
from lang2policy.scene.render import CameraRenderer
from lang2policy.vla.sim.render_twin import RenderTwin
from lang2policy.vla.spec.schema import CAMERAS, FPS, IMAGE_SIZE


def sensor_frame(world, rgb: np.ndarray, frame: int) -> np.ndarray:
    """A rendered frame of ``world`` as the realism look's sensor records it (exposure, blur,
    noise; seeded by the layout and the frame). The frame as rendered without a look."""
    if world.look is None:
        return rgb
    from lang2policy.realism.image_effects import apply_image_effects

    rng = np.random.default_rng([world.seed or 0, frame, 11])
    return apply_image_effects(rgb, world.look.image, rng)


class FrameRecorder:
    """Collects frames from ``robot``'s world; ``arrays()`` hands them over."""

    def __init__(
        self,
        robot: SimRobot,
        renderer: CameraRenderer | RenderTwin,
        cameras: tuple[str, ...] = CAMERAS,
        fps: int = FPS,
        environment: Callable[[], np.ndarray] | None = None,
    ) -> None:
        """``environment``: called at every frame for its privileged scene state (optional)."""
        self.robot, self.renderer, self.cameras = robot, renderer, cameras
        self.environment = environment
        self.environment_rows: list[np.ndarray] = []
        self.period = 1.0 / fps
        self.images: dict[str, list[np.ndarray]] = {c: [] for c in cameras}
        self.states: list[np.ndarray] = []
        self.commands: list[np.ndarray] = []
        self._next = robot.world.time

    def __call__(self) -> None:
        """Take a frame if one is due (robot observer)."""
        if self.robot.world.time + 1e-9 >= self._next:
            due = self._next
            self.take()
            self._next = due + self.period  # on the 10 Hz grid, whatever the control period

    def take(self) -> None:
        """Take a frame now (the next one is due one period later)."""
        world = self.robot.world
        frame = len(self.states)
        for camera in self.cameras:
            rgb = self.renderer.render(world.data, camera)
            self.images[camera].append(sensor_frame(world, rgb, frame))
        state = self.robot.get_observation().position.astype(np.float32)
        command = self.robot.last_command
        self.states.append(state)
        if self.environment is not None:
            self.environment_rows.append(self.environment())
        self.commands.append(state if command is None else command.astype(np.float32))
        self._next = world.time + self.period

    def __len__(self) -> int:
        return len(self.states)

    def arrays(self) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
        """(images per camera (T, H, W, 3) uint8, state (T, 6), action (T, 6))."""
        images = {c: np.stack(frames) for c, frames in self.images.items()}
        state = np.stack(self.states)
        commands = np.stack(self.commands)
        action = np.concatenate([commands[1:], commands[-1:]])
        return images, state, action

    def environment_array(self) -> np.ndarray | None:
        """The scene state of every frame ``float32 (T, dim)``, or None if none was asked for."""
        if self.environment is None:
            return None
        return np.stack(self.environment_rows).astype(np.float32)


def frame_renderer(world, size: int = IMAGE_SIZE) -> RenderTwin:
    """A renderer at the frames' resolution: the world's render twin (lighter meshes, the same
    images at this size, six times faster; ``render_twin``)."""
    return RenderTwin(world, size, size)
