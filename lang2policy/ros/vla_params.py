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
from lang2policy.vla.policy.ensemble import DEFAULT_M
from lang2policy.vla.skill.actor import EnsembledActor
from lang2policy.vla.skill.limits import SkillLimits
from lang2policy.vla.skill.message import Box
from lang2policy.vla.skill.runner import RunnerSettings
from lang2policy.vla.spec.schema import FPS, ROBOT_TYPE


class VLAParameters(ReadOnlyParameters):
    """Reads the VLA node's parameters into the core's settings, backend and limits."""

    def _settings(self, model_fps: float | None = None) -> RunnerSettings:
        """``model_fps``: the frame rate the backend's model was trained at (a local model's
        config.json), the rate's default; None: ``FPS``."""
        return RunnerSettings(
            rate=self._number(
                "rate", float(model_fps or FPS), "Hz of policy steps (default: the model's fps)"
            ),
            state_timeout=self._number("state_timeout", 0.5, "s: older states hold the arm"),
            image_timeout=self._number("image_timeout", 0.5, "s: older images hold the arm"),
            objects_timeout=self._number("objects_timeout", 2.0, "s: older poses: no success"),
            startup_grace=self._number(
                "startup_grace", 5.0, "s to wait for the first inputs", zero=True
            ),
            max_seconds=self._number(
                "max_seconds", 0.0, "s per skill; 0: the family's budget", zero=True
            ),
        )

    def _default_limits(self) -> SkillLimits:
        """A plan's limits narrow these: config/safety.yaml's speed and workspace box."""
        safety = load_safety_config(ROBOT_TYPE)
        speed = self._number(
            "max_joint_speed", 0.0, "rad/s per joint; 0: config/safety.yaml's", zero=True
        )
        box = Box(tuple(safety.workspace.min), tuple(safety.workspace.max))  # type: ignore[arg-type]
        return SkillLimits(min(speed or safety.max_joint_speed, safety.max_joint_speed), box)

    def _actor(self) -> EnsembledActor:
        backend_text = self._param(
            "backend", "local", "local | openpi://H:P | openvla://H:P | lerobot://H:P"
        )
        model = self._param("model", "", 'local: model directory; "" = the shipped model')
        limits = RemoteLimits(
            connect_s=self._number("connect_timeout", 3.0, "s to reach a remote backend"),
            request_s=self._number("request_timeout", 2.0, "s per remote request"),
        )
        ensemble_m = self._number("ensemble_m", DEFAULT_M, "temporal ensembling m", zero=True)
        query_every = int(self._number("query_every", 1, "steps per request", integer=True))
        backend = open_backend(
            backend_text, model_dir=model or None, limits=limits, lerobot=self._lerobot()
        )
        policy = getattr(backend, "policy", None)
        if policy is not None:  # load the instruction encoder now, not at the first skill
            policy.warm_up()
        return EnsembledActor(backend, ensemble_m, query_every)

    def _lerobot(self) -> LeRobotOptions:
        """The ``lerobot_*`` parameters: the policy a ``lerobot://`` backend's server runs."""
        cameras = self._param("lerobot_cameras", "", "comma-separated; \"\": the checkpoint's")
        return LeRobotOptions(
            checkpoint=self._param("lerobot_checkpoint", "", "pretrained_model dir of the policy"),
            policy_type=self._param("lerobot_policy", "", "act, diffusion ...; \"\": its config's"),
            calibration=self._param(
                "lerobot_calibration", "", "arm calibration if it speaks LeRobot's units"
            ),
            device=self._param("lerobot_device", "cpu", "the server's torch device"),
            actions_per_chunk=int(
                self._number("lerobot_chunk", 10, "actions per chunk", integer=True)
            ),
            cameras=tuple(c.strip() for c in cameras.split(",") if c.strip()),
            load_s=self._number("lerobot_load_timeout", 120.0, "s for the server to load it"),
            allow_remote=self._switch("lerobot_allow_remote", False, "non-loopback server")
            in (True, "true", "on"),
            fps=int(
                self._number("lerobot_fps", 0, "its training fps; 0: its dataset's", True, True)
            ),
        )
