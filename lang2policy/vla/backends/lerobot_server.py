"""A backend that asks LeRobot's async-inference policy server for action chunks.

The server (``python -m lerobot.async_inference.policy_server``, in LeRobot's own environment:
``lang2policy vla-serve --lerobot CKPT`` starts it) runs any policy LeRobot trains (ACT,
Diffusion, SmolVLA, pi0 ...), so its torch never meets ours. The protocol is gRPC
``transport.AsyncInference`` with pickled payloads (``lerobot_wire``):

1. ``Ready`` (the server forgets the last client's queue), then ``SendPolicyInstructions``
   with the policy to load (``LeRobotPolicySpec``) and the robot's features, sent once the
   first images tell the cameras' sizes, and again after a reconnect;
2. per chunk: ``SendObservations`` (the state by the policy's names and units, the camera
   images, the instruction as ``task``; ``must_go`` so the server never skips it), then
   ``GetActions``, whose answer is read by ``read_action_chunk``'s allow-list: no object of
   the sender's is ever built, a hostile answer is refused and the arm holds.

The server is reached on loopback only unless ``allow_remote``: its protocol unpickles what a
client sends, so it must not listen on a network (tunnel it over SSH instead).
"""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Mapping

import grpc
import numpy as np

from lang2policy.errors import ConfigError, PolicyBackendError
from lang2policy.vla.backends.base import RemoteLimits, validate_chunk
from lang2policy.vla.backends.lerobot_answer import read_action_chunk
from lang2policy.vla.backends.lerobot_policy import IMAGE_PREFIX, LeRobotPolicySpec, PolicyUnits
from lang2policy.vla.backends.lerobot_wire import (
    MAX_MESSAGE_SIZE,
    decode_actions,
    encode_observation_chunks,
    encode_policy_setup,
    policy_setup_pickle,
    timed_observation_pickle,
)
from lang2policy.vla.backends.observation import check_observation
from lang2policy.vla.spec.schema import ACTION_DIM

DEFAULT_PORT = 8080  # LeRobot's policy_server default
SERVICE = "/transport.AsyncInference/"
DEFAULT_LOAD_S = 120.0  # the server loads the policy inside SendPolicyInstructions


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback address (127.0.0.0/8, ::1)."""
    if host.rstrip(".").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class LeRobotBackend:
    """A gRPC client of one LeRobot policy server; connects on first use."""

    def __init__(
        self,
        host: str,
        port: int,
        spec: LeRobotPolicySpec,
        *,
        limits: RemoteLimits | None = None,
        load_s: float = DEFAULT_LOAD_S,
        allow_remote: bool = False,
    ) -> None:
        if not allow_remote and not is_loopback(host):
            raise ConfigError(
                f"lerobot://{host}:{port}: LeRobot's policy server unpickles what it is sent, "
                "so it is reached on loopback only (127.0.0.1, ::1, localhost); tunnel a remote "
                "server over SSH, or allow it explicitly (lerobot_allow_remote:=true)"
            )
        self.host, self.port, self.spec = host, port, spec
        self.limits = limits or RemoteLimits()
        self.load_s = load_s
        self.units = PolicyUnits(spec.calibration)
        self._channel: grpc.Channel | None = None
        self._loaded_for: dict[str, tuple[int, ...]] | None = None  # image shapes sent
        self._timestep = 0
        self._answered = False  # since the policy was (re)loaded

    @property
    def name(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"lerobot://{host}:{self.port}"

    @property
    def cameras(self) -> tuple[str, ...]:
        return self.spec.cameras

    @property
    def fps(self) -> int | None:
        """The rate the policy was trained at, when known: the VLA node's default rate."""
        return self.spec.fps

    def reset(self) -> None:
        """A new episode: the next chunk starts at timestep 0, after a ``Ready``."""
        self._timestep = 0
        if self._channel is not None:
            self._call("Ready", b"", self.limits.request_s)

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
        self._channel, self._loaded_for, self._answered = None, None, False

    def act_chunk(
        self, images: Mapping[str, np.ndarray], state: np.ndarray, instruction: str
    ) -> np.ndarray:
        """The server's next chunk for this observation, in our units, checked."""
        selected, state, instruction = check_observation(
            images, state, instruction, self.cameras, self.name
        )
        try:
            self._load_policy({camera: image.shape for camera, image in selected.items()})
            observation = {**self.units.observation(state), **selected, "task": instruction}
            payload = timed_observation_pickle(time.time(), self._timestep, observation, True)
            self._stream("SendObservations", encode_observation_chunks(payload))
            # the first answer after a load includes the server's warm-up (seconds on a busy CPU)
            wait = self.limits.request_s if self._answered else self.load_s
            answer = self._call("GetActions", b"", wait)
            rows = self.units.actions(self._read(answer))
        except PolicyBackendError:
            self.close()  # a late answer must never pass for the next request's
            raise
        except Exception as exc:  # a hostile answer must end in the one error the node holds on
            self.close()
            unusable = f"{self.name}: unusable answer ({type(exc).__name__})"
            raise PolicyBackendError(unusable) from exc
        self._timestep += 1
        self._answered = True
        return validate_chunk(rows, self.name, self.limits.max_chunk_rows)

    def _read(self, answer: bytes) -> np.ndarray:
        data = decode_actions(answer, self.limits.max_answer_bytes)
        if not data:
            raise PolicyBackendError(
                f"{self.name}: the server answered no action chunk (its policy failed on the "
                "observation, or none reached it within its obs_queue_timeout; its log says which)"
            )
        rows, steps, _ = read_action_chunk(
            data, self.limits.max_answer_bytes, self.limits.max_chunk_rows, ACTION_DIM
        )
        if steps[0] != self._timestep:
            raise PolicyBackendError(
                f"{self.name}: the chunk starts at timestep {steps[0]}, not at the observation's "
                f"{self._timestep}: an answer to another request"
            )
        return rows

    def _load_policy(self, shapes: dict[str, tuple[int, ...]]) -> None:
        """Connect, ``Ready`` and ask the server to load the policy for these image shapes
        (once per connection, and again when a camera's size changes)."""
        if self._loaded_for == shapes:
            return
        self._connect()
        names = self.units.names
        features: dict[str, dict[str, object]] = {
            "observation.state": {"dtype": "float32", "shape": (len(names),), "names": names}
        }
        image_names = ["height", "width", "channels"]
        for camera, shape in shapes.items():
            features[IMAGE_PREFIX + camera] = {
                "dtype": "image", "shape": tuple(shape), "names": image_names
            }
        spec = self.spec
        setup = policy_setup_pickle(spec.policy_type, spec.checkpoint, features,
                                    spec.actions_per_chunk, spec.device)  # fmt: skip
        self._call("Ready", b"", self.limits.connect_s)
        self._call("SendPolicyInstructions", encode_policy_setup(setup), self.load_s)
        self._loaded_for = shapes

    def _connect(self) -> None:
        if self._channel is not None:
            return
        options = [
            ("grpc.max_receive_message_length", self.limits.max_answer_bytes + 64),
            ("grpc.max_send_message_length", MAX_MESSAGE_SIZE),
            ("grpc.enable_retries", 0),
        ]
        channel = grpc.insecure_channel(self.name.removeprefix("lerobot://"), options=options)
        try:
            grpc.channel_ready_future(channel).result(timeout=self.limits.connect_s)
        except grpc.FutureTimeoutError as exc:
            channel.close()
            raise PolicyBackendError(
                f"{self.name}: no LeRobot policy server answered within "
                f"{self.limits.connect_s:g} s (start one: lang2policy vla-serve --lerobot CKPT)"
            ) from exc
        self._channel = channel

    def _call(self, method: str, request: bytes, timeout: float) -> bytes:
        assert self._channel is not None
        call = self._channel.unary_unary(SERVICE + method)
        try:
            return call(request, timeout=timeout)
        except grpc.RpcError as exc:
            raise self._rpc_error(method, exc, timeout) from exc

    def _stream(self, method: str, messages: list[bytes]) -> None:
        assert self._channel is not None
        call = self._channel.stream_unary(SERVICE + method)
        try:
            call(iter(messages), timeout=self.limits.request_s)
        except grpc.RpcError as exc:
            raise self._rpc_error(method, exc, self.limits.request_s) from exc

    def _rpc_error(self, method: str, exc: grpc.RpcError, timeout: float) -> PolicyBackendError:
        code = exc.code() if isinstance(exc, grpc.Call) else None
        detail = exc.details() if isinstance(exc, grpc.Call) else str(exc)
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return PolicyBackendError(f"{self.name}: {method} took over {timeout:g} s")
        return PolicyBackendError(f"{self.name}: {method} failed: {code}: {detail!s:.300}")
