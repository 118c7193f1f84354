"""A backend that asks an openpi policy server (``serve_policy.py``) for action chunks.

The protocol (openpi's ``websocket_policy_server``): a websocket at ``ws://host:port`` without
compression; right after the handshake the server sends one binary msgpack frame of metadata
(a map). Then, per request, the client sends the observation as a msgpack-numpy map and the
server answers a msgpack-numpy map that always holds ``actions`` (``[chunk, dim]``) and
usually ``server_timing``. A *text* frame instead is the server's traceback, followed by a
close with code 1011. ``GET /healthz`` on the same port answers 200 "OK".

The observation's keys depend on the server's policy config; ``OpenPIKeys`` maps ours onto
them (LIBERO-style by default: ``observation/image``, ``observation/wrist_image``,
``observation/state``, ``prompt``). Images are sent as uint8 224 x 224 x 3, resized with
padding as openpi's clients do; the state is sent un-normalised (the server normalises it).
The answer's ``actions`` must be SO-101 joint targets ``[chunk, 6]`` (see ``base``).

After any failure the connection is dropped, so a late answer to a timed-out request can never
be taken for the answer to the next one; the next ``act_chunk`` reconnects.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from websockets.exceptions import ConnectionClosed, WebSocketException
from websockets.sync.client import ClientConnection, connect

from lang2policy.errors import ConfigError, PolicyBackendError
from lang2policy.vla.backends.base import RemoteLimits, validate_chunk
from lang2policy.vla.backends.http_call import Watchdog, exchange
from lang2policy.vla.backends.observation import check_observation, resize_with_pad
from lang2policy.vla.backends.wire import pack_msgpack, unpack_msgpack

DEFAULT_PORT = 8000  # openpi's serve_policy.py
_CLOSE_S = 1.0  # the most that closing a connection waits for the server's close frame
_MESSAGE_TOO_BIG = 1009  # websocket close code sent when a frame is over max_size
_EXCERPT = 300  # characters of a server traceback quoted in an error


def _libero_images() -> dict[str, str]:
    return {"front": "observation/image", "wrist": "observation/wrist_image"}


@dataclass(frozen=True)
class OpenPIKeys:
    """Where our observation goes in the server's observation map, and where its actions are.

    ``images`` maps our camera names to the server's image keys (only these cameras are sent),
    ``image_size`` is the square side the images are resized to with padding.
    """

    images: Mapping[str, str] = field(default_factory=_libero_images)
    state: str = "observation/state"
    prompt: str = "prompt"
    actions: str = "actions"
    image_size: int = 224

    def __post_init__(self) -> None:
        keys = [*self.images.values(), self.state, self.prompt]
        names = [*keys, *self.images, self.actions]
        if not self.images or not all(isinstance(name, str) and name for name in names):
            raise ConfigError(
                "openpi keys and camera names must be non-empty strings, with one image at "
                f"least; got images {dict(self.images)}, state {self.state!r}, prompt "
                f"{self.prompt!r}, actions {self.actions!r}"
            )
        if len(set(keys)) != len(keys):
            raise ConfigError(f"openpi observation keys must differ, got {keys}")
        if not isinstance(self.image_size, int) or not 8 <= self.image_size <= 4096:
            raise ConfigError(f"image_size must be 8..4096 pixels, got {self.image_size!r}")


class OpenPIBackend:
    """A websocket client of one openpi server; connects on first use (or ``connect()``)."""

    def __init__(
        self,
        host: str,
        port: int = DEFAULT_PORT,
        *,
        keys: OpenPIKeys | None = None,
        limits: RemoteLimits | None = None,
        api_key: str | None = None,
    ) -> None:
        self.host, self.port = host, port
        self.keys = keys or OpenPIKeys()
        self.limits = limits or RemoteLimits()
        self._api_key = api_key
        self._connection: ClientConnection | None = None
        self.metadata: dict = {}  # the server's first frame; empty until connected

    @property
    def name(self) -> str:
        return f"openpi://{self._netloc}"

    @property
    def cameras(self) -> tuple[str, ...]:
        return tuple(self.keys.images)

    @property
    def _netloc(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def check_health(self) -> None:
        """``GET /healthz``; ``PolicyBackendError`` unless the server answers 200."""
        answer = exchange(self.host, self.port, "GET", "/healthz", None, self.limits, self.name)
        if answer.status != 200:
            raise PolicyBackendError(f"{self.name}: /healthz answered HTTP {answer.status}")

    def connect(self) -> dict:
        """Open the websocket and read the metadata frame (once); returns the metadata."""
        if self._connection is None:
            self._connection, self.metadata = self._open()
        return self.metadata

    def reset(self) -> None:
        """A new episode: the next request opens a new connection. openpi's protocol has no
        reset message (its client's ``reset`` is empty); a server that keeps state per
        episode (``openpi_server.PolicyServer``, our own policy) resets it per connection."""
        self._drop()

    def close(self) -> None:
        self._drop()

    def act_chunk(
        self, images: Mapping[str, np.ndarray], state: np.ndarray, instruction: str
    ) -> np.ndarray:
        """One request; its ``actions`` as ``float32 [chunk, 6]``. ``PolicyBackendError`` on a
        timeout, a closed or refused connection, a server error or a malformed answer."""
        selected, state, instruction = check_observation(
            images, state, instruction, self.cameras, self.name
        )
        message = pack_msgpack(self._observation(selected, state, instruction))
        try:
            self.connect()
            actions = self._actions(self._infer(message))
            return validate_chunk(actions, self.name, self.limits.max_chunk_rows)
        except PolicyBackendError:
            self._drop()
            raise

    def _observation(
        self, images: Mapping[str, np.ndarray], state: np.ndarray, instruction: str
    ) -> dict[str, object]:
        """Our observation under the server's keys."""
        size = self.keys.image_size
        observation: dict[str, object] = {
            key: resize_with_pad(images[camera], size) for camera, key in self.keys.images.items()
        }
        observation[self.keys.state] = state
        observation[self.keys.prompt] = instruction
        return observation

    def _open(self) -> tuple[ClientConnection, dict]:
        """A new connection and the server's metadata, within ``connect_s``."""
        deadline = time.monotonic() + self.limits.connect_s
        headers = {"Authorization": f"Api-Key {self._api_key}"} if self._api_key else None
        try:
            connection = connect(
                f"ws://{self._netloc}",
                compression=None,
                max_size=self.limits.max_answer_bytes,
                open_timeout=self.limits.connect_s,
                close_timeout=_CLOSE_S,
                additional_headers=headers,
                proxy=None,  # a policy server is reached directly, never through a proxy
                legacy=True,  # a plain connection object, kept across requests
            )
        except (OSError, WebSocketException) as exc:
            raise PolicyBackendError(
                f"{self.name}: cannot connect within {self.limits.connect_s:g} s ({exc}); is "
                "the openpi server running and listening there?"
            ) from exc
        try:
            frame = connection.recv(timeout=max(0.0, deadline - time.monotonic()))
        except (OSError, ConnectionClosed) as exc:
            connection.close()
            raise self._failure(exc, None, "metadata frame") from exc
        try:
            metadata = unpack_msgpack(self._binary(frame, "metadata"), f"{self.name} metadata")
            if not isinstance(metadata, dict):
                raise PolicyBackendError(
                    f"{self.name}: the metadata frame holds {type(metadata).__name__}; "
                    "expected a map"
                )
        except PolicyBackendError:
            connection.close()
            raise
        return connection, metadata

    def _infer(self, message: bytes) -> object:
        """Send one observation and read one answer, all within ``request_s``."""
        connection = self._connection
        assert connection is not None  # connect() ran first
        deadline = time.monotonic() + self.limits.request_s
        watchdog = Watchdog(connection.socket, self.limits.request_s)  # a blocked send too
        try:
            connection.send(message)
            frame = connection.recv(timeout=max(0.0, deadline - time.monotonic()))
        except (OSError, ConnectionClosed) as exc:  # OSError: TimeoutError, a broken socket
            raise self._failure(exc, watchdog, "answer") from exc
        finally:
            watchdog.cancel()
        if watchdog.fired:
            raise self._failure(TimeoutError(), watchdog, "answer")
        return unpack_msgpack(self._binary(frame, "answer"), f"{self.name} answer")

    def _binary(self, frame: str | bytes, what: str) -> bytes:
        """A binary frame's bytes; a text frame is the server's traceback: its last line."""
        if isinstance(frame, bytes):
            return frame
        lines = [line for line in frame.strip().splitlines() if line.strip()]
        last = lines[-1] if lines else "(empty)"
        raise PolicyBackendError(
            f"{self.name}: the server failed instead of sending its {what}: {last[:_EXCERPT]}"
        )

    def _failure(self, exc: Exception, watchdog: Watchdog | None, what: str) -> PolicyBackendError:
        """The error for a timed-out or closed connection, saying which it was."""
        limits = self.limits
        if isinstance(exc, TimeoutError) or (watchdog is not None and watchdog.fired):
            seconds = limits.connect_s if watchdog is None else limits.request_s
            return PolicyBackendError(f"{self.name}: no {what} within {seconds:g} s (timeout)")
        sent = getattr(exc, "sent", None)
        if sent is not None and sent.code == _MESSAGE_TOO_BIG:
            return PolicyBackendError(
                f"{self.name}: the {what} is over {limits.max_answer_bytes} bytes and was "
                f"refused (max_answer_bytes): {sent.reason}"
            )
        return PolicyBackendError(
            f"{self.name}: the connection closed before the {what} came ({exc})"
        )

    def _actions(self, answer: object) -> object:
        """The ``actions`` entry of an answer map, before the shape and value checks."""
        if not isinstance(answer, dict):
            raise PolicyBackendError(
                f"{self.name}: the answer is {type(answer).__name__}; expected a map with "
                f"{self.keys.actions!r}"
            )
        if self.keys.actions not in answer:
            keys = [str(key)[:40] for key in list(answer)[:10]]
            raise PolicyBackendError(
                f"{self.name}: the answer has no {self.keys.actions!r}; its keys are {keys}"
            )
        return answer[self.keys.actions]

    def _drop(self) -> None:
        """Forget the connection (closing it, bounded by ``_CLOSE_S``)."""
        connection, self._connection, self.metadata = self._connection, None, {}
        if connection is not None:
            connection.close()
