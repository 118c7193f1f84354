"""The VLA node's read-only parameters (``lang2policy.ros.vla_node`` lists them): the
runner's rate and timeouts, the policy backend, and the default limits of a skill plan.

Apart from the node so that the node's file holds its topic logic; the defaults of a plan's
limits are the safety node's (config/safety.yaml) for the robot the VLA drives, so a plan
may narrow them but never widen them.
"""

from __future__ import annotations

from lang2policy.ros.params import ReadOnlyParameters
from lang2policy.safety.config import load_safety_config
from lang2policy.vla.backends import RemoteLimits, open_backend
from lang2policy.vla.backends.select import LeRobotOptions
from lang2policy.vla.skill.actor import EnsembledActor
from lang2policy.vla.skill.limits import SkillLimits
from lang2policy.vla.skill.look import look_pose
from lang2policy.vla.skill.message import Box
from lang2policy.vla.skill.runner import RunnerSettings
from lang2policy.vla.spec.schema import FPS, ROBOT_TYPE


class VLAParameters(ReadOnlyParameters):
    """Reads the VLA node's parameters into the core's settings, backend and limits."""

    def _settings(self, model_fps: float | None = None) -> RunnerSettings:
        """``model_fps``: the frame rate the backend's model was trained at (a local model's
        config.json), the rate's default; None: ``FPS``."""
        return RunnerSettings(
            rate=self._param("rate", float(model_fps or FPS)),
            state_timeout=self._param("state_timeout"),
            image_timeout=self._param("image_timeout"),
            objects_timeout=self._param("objects_timeout"),
            startup_grace=self._param("startup_grace"),
            max_seconds=self._param("max_seconds"),
            look_pose=look_pose() if self._param("look_to_confirm") else (),
        )

    def _default_limits(self) -> SkillLimits:
        """A plan's limits narrow these: config/safety.yaml's speed and workspace box."""
        safety = load_safety_config(ROBOT_TYPE)
        speed = self._param("max_joint_speed")
        box = Box(tuple(safety.workspace.min), tuple(safety.workspace.max))  # type: ignore[arg-type]
        return SkillLimits(min(speed or safety.max_joint_speed, safety.max_joint_speed), box)

    def _actor(self) -> EnsembledActor:
        backend_text = self._param("backend")
        model = self._param("model")
        limits = RemoteLimits(
            connect_s=self._param("connect_timeout"),
            request_s=self._param("request_timeout"),
        )
        ensemble_m = self._param("ensemble_m")
        query_every = int(self._param("query_every"))
        backend = open_backend(
            backend_text, model_dir=model or None, limits=limits, lerobot=self._lerobot()
        )
        policy = getattr(backend, "policy", None)
        if policy is not None:  # load the instruction encoder now, not at the first skill
            policy.warm_up()
        return EnsembledActor(backend, ensemble_m, query_every)

    def _lerobot(self) -> LeRobotOptions:
        """The ``lerobot_*`` parameters: the policy a ``lerobot://`` backend's server runs."""
        cameras = self._param("lerobot_cameras")
        return LeRobotOptions(
            checkpoint=self._param("lerobot_checkpoint"),
            policy_type=self._param("lerobot_policy"),
            calibration=self._param("lerobot_calibration"),
            device=self._param("lerobot_device"),
            actions_per_chunk=int(self._param("lerobot_chunk")),
            cameras=tuple(c.strip() for c in cameras.split(",") if c.strip()),
            load_s=self._param("lerobot_load_timeout"),
            allow_remote=self._param("lerobot_allow_remote") in (True, "true", "on"),
            fps=int(self._param("lerobot_fps")),
        )

