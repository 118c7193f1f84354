"""A backend that asks an OpenVLA-style REST server (``vla-scripts/deploy.py``) for actions.

The protocol: ``POST /act`` with a json-numpy body ``{"image": uint8 H x W x 3,
"instruction": str, "unnorm_key": str | null}``; the answer is the json-numpy action (plain
``JSONResponse(action)``). The server builds the prompt ("In: What action should the robot
take to {instruction}?") and resizes the image to 224 itself, so the image goes as it is
unless ``image_size`` asks for a resize with padding. On any exception the server answers
the JSON string ``"error"`` with HTTP 200; that is reported as an error here, never parsed.

Action space: stock OpenVLA answers one 7-D end-effector delta (xyz, rpy, gripper) for the
robots of its training data, which cannot drive the SO-101. This backend takes an answer of
shape ``[6]`` (one action) or ``[k, 6]`` (a chunk, as OpenVLA-OFT-style servers answer, also
as a list of ``[6]`` arrays) and reads it as absolute joint targets and the gripper opening
0..1, in the order of ``ACTION_NAMES``: i.e. a model fine-tuned on SO-101 joint actions. Any
other shape is refused with an error that says what came back and what is expected.

Not used: the "double-encoded" request form (``{"encoded": ...}``), meant for clients without
json-numpy; this backend always sends the plain form, so the answer is never double-encoded.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from lang2policy.errors import ConfigError, PolicyBackendError
from lang2policy.vla.backends.base import RemoteLimits, validate_chunk
from lang2policy.vla.backends.http_call import Answer, exchange
from lang2policy.vla.backends.observation import check_observation, resize_with_pad
from lang2policy.vla.backends.wire import decode_json_numpy, encode_json_numpy

DEFAULT_PORT = 8000  # deploy.py's DeployConfig (OpenVLA-OFT's server uses 8777)
ERROR_ANSWER = "error"  # what deploy.py answers, with HTTP 200, when inference failed
_EXCERPT = 200  # characters of an unexpected answer quoted in an error


class OpenVLABackend:
    """Sends one camera image and the instruction; the state is not part of this protocol."""

    def __init__(
        self,
        host: str,
        port: int = DEFAULT_PORT,
        *,
        camera: str = "front",
        unnorm_key: str | None = None,
        image_size: int | None = None,
        path: str = "/act",
        limits: RemoteLimits | None = None,
    ) -> None:
        if image_size is not None and not 8 <= image_size <= 4096:
            raise ConfigError(f"image_size must be 8..4096 pixels or None, got {image_size}")
        if not path.startswith("/"):
            raise ConfigError(f"the endpoint path must start with '/', got {path!r}")
        self.host, self.port = host, port
        self.camera = camera
        self.unnorm_key = unnorm_key
        self.image_size = image_size
        self.path = path
        self.limits = limits or RemoteLimits()

    @property
    def name(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"openvla://{host}:{self.port}"

    @property
    def cameras(self) -> tuple[str, ...]:
        return (self.camera,)

    def reset(self) -> None:
        """Nothing to forget: the server keeps no state between requests."""

    def close(self) -> None:
        """Nothing to release: each request uses its own connection."""

    def act_chunk(
        self, images: Mapping[str, np.ndarray], state: np.ndarray, instruction: str
    ) -> np.ndarray:
        """One ``POST /act``; the answer as ``float32 [chunk, 6]`` (see the module docstring),
        ``PolicyBackendError`` on a timeout, an error answer or a malformed one."""
        selected, _, instruction = check_observation(
            images, state, instruction, self.cameras, self.name
        )
        image = selected[self.camera]
        if self.image_size is not None:
            image = resize_with_pad(image, self.image_size)
        payload = {"image": image, "instruction": instruction, "unnorm_key": self.unnorm_key}
        body = encode_json_numpy(payload)
        answer = exchange(self.host, self.port, "POST", self.path, body, self.limits, self.name)
        return validate_chunk(self._actions(answer), self.name, self.limits.max_chunk_rows)

    def _actions(self, answer: Answer) -> object:
        """The action array in a ``/act`` answer, before the shape and value checks."""
        if answer.status != 200:
            excerpt = answer.body[:_EXCERPT].decode("utf-8", "replace")
            raise PolicyBackendError(
                f"{self.name}: HTTP {answer.status} from {self.path}: {excerpt!r}"
            )
        value = decode_json_numpy(answer.body, self.name, self.limits.max_answer_bytes)
        if isinstance(value, str) and value == ERROR_ANSWER:
            raise PolicyBackendError(
                f'{self.name}: the server answered "error" (with HTTP 200): its inference '
                "failed; its log has the traceback (a wrong or missing unnorm_key, or an "
                "image it cannot read, are common causes)"
            )
        if isinstance(value, str):
            raise PolicyBackendError(
                f"{self.name}: the server answered the string {value[:_EXCERPT]!r}; expected "
                "a json-numpy action array"
            )
        if isinstance(value, list):
            try:
                return np.asarray(value)
            except (ValueError, TypeError) as exc:
                raise PolicyBackendError(
                    f"{self.name}: the answer is a list that is not a rectangular array ({exc})"
                ) from exc
        return value
