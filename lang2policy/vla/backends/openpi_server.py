"""Our own VLA checkpoint served over openpi's websocket protocol (``lang2policy vla-serve
--checkpoint DIR``), so the policy can run on another machine (a GPU host) while the graph
drives the arm here through ``backend:=openpi://HOST:PORT``.

The protocol is the one ``openpi.OpenPIBackend`` speaks as a client (openpi's
``websocket_policy_server``): after the handshake the server sends one msgpack metadata frame;
then each binary frame is an observation (a msgpack-numpy map with ``observation/image``,
``observation/wrist_image``, ``observation/state`` and ``prompt`` by default) and is answered
with ``{"actions": [chunk, 6], "server_timing": {...}}``. A failure is answered as openpi does:
a text frame with the reason, then a close with code 1011. ``GET /healthz`` answers 200 "OK".

Our policy is stateful across one episode (its scene latch and keyframes), which openpi's
protocol cannot say, so one *connection* is one episode: the policy is reset when a client
connects, and the client (``OpenPIBackend.reset``) reconnects for each new skill. One client
at a time: a second connection while one is open is refused (close code 1013, "try again
later"), since two clients interleaving would share one episode's state.

Everything a client sends is bounded before it is used: frames over ``MAX_FRAME_BYTES`` are
refused by the websocket layer, the map is decoded by the bounded msgpack-numpy reader, and
the images, state and prompt are checked by ``check_observation``. It listens on loopback
unless told otherwise; the protocol has no authentication.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http import HTTPStatus

import cv2
import numpy as np
from websockets.exceptions import ConnectionClosed
from websockets.sync.server import Server, ServerConnection, serve

from lang2policy.errors import ConfigError, PolicyBackendError
from lang2policy.vla.backends.base import PolicyBackend
from lang2policy.vla.backends.lerobot_server import is_loopback
from lang2policy.vla.backends.openpi import OpenPIKeys
from lang2policy.vla.backends.wire import pack_msgpack, unpack_msgpack

MAX_FRAME_BYTES = 4 << 20  # two 224 x 224 x 3 images and a state are about 0.3 MB
_INTERNAL_ERROR = 1011
_TRY_AGAIN_LATER = 1013


@dataclass(frozen=True)
class ServedModel:
    """What the server runs: the backend, the side of the square images it takes, its name."""

    backend: PolicyBackend
    image_size: int
    name: str


class PolicyServer:
    """An openpi-protocol websocket server around one ``ServedModel``; ``start`` runs it in a
    thread, ``serve_forever`` in the caller's."""

    def __init__(
        self,
        model: ServedModel,
        host: str = "127.0.0.1",
        port: int = 8000,
        *,
        keys: OpenPIKeys | None = None,
        allow_remote: bool = False,
        log: Callable[[str], None] = print,
    ) -> None:
        if not allow_remote and not is_loopback(host):
            raise ConfigError(
                f"--host {host}: the openpi protocol has no authentication; the server "
                "listens on loopback unless --allow-remote (better: an SSH tunnel)"
            )
        self.model, self.keys, self.log = model, keys or OpenPIKeys(), log
        self._busy = threading.Lock()  # held while a client is connected
        self._server: Server = serve(
            self._handle,
            host,
            port,
            compression=None,
            max_size=MAX_FRAME_BYTES,
            process_request=_health,
        )
        self._thread: threading.Thread | None = None
        self.port = int(self._server.socket.getsockname()[1])  # the OS's choice for port 0

    def serve_forever(self) -> None:
        self._server.serve_forever()

    def start(self) -> PolicyServer:
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._server.shutdown()
        if self._thread is not None:
            self._thread.join(timeout=5.0)

    def metadata(self) -> dict[str, object]:
        """The first frame: what the client is talking to."""
        return {
            "policy": self.model.name,
            "image_size": self.model.image_size,
            "cameras": list(self.model.backend.cameras),
        }

    # ------------------------------------------------------------------ one client
    def _handle(self, connection: ServerConnection) -> None:
        if not self._busy.acquire(blocking=False):
            connection.close(_TRY_AGAIN_LATER, "busy: one client at a time (one episode)")
            return
        try:
            self.model.backend.reset()  # one connection, one episode
            connection.send(pack_msgpack(self.metadata()))
            self.log(f"client {connection.remote_address}: connected, policy reset")
            for frame in connection:
                if not self._answer(connection, frame):
                    return
        except ConnectionClosed:
            pass
        finally:
            self._busy.release()

    def _answer(self, connection: ServerConnection, frame: str | bytes) -> bool:
        """Answer one observation; False after a failure (reported, connection closed)."""
        started = time.monotonic()
        try:
            if not isinstance(frame, bytes):
                raise PolicyBackendError("a text frame; observations are binary msgpack")
            images, state, prompt = self._observation(unpack_msgpack(frame, "observation"))
            chunk = self.model.backend.act_chunk(images, state, prompt)
        except PolicyBackendError as exc:
            self.log(f"client {connection.remote_address}: refused: {exc}")
            connection.send(f"PolicyBackendError: {exc}")
            connection.close(_INTERNAL_ERROR, "policy error")
            return False
        timing = {"infer_ms": 1000.0 * (time.monotonic() - started)}
        connection.send(pack_msgpack({self.keys.actions: chunk, "server_timing": timing}))
        return True

    def _observation(self, message: object) -> tuple[dict[str, np.ndarray], np.ndarray, str]:
        """Our images (resized to the model's side), state and prompt from the client's map."""
        if not isinstance(message, Mapping):
            raise PolicyBackendError(f"the observation is {type(message).__name__}; expected a map")
        wanted = {camera: self.keys.images.get(camera) for camera in self.model.backend.cameras}
        missing = [key or camera for camera, key in wanted.items() if key not in message]
        if missing or self.keys.state not in message or self.keys.prompt not in message:
            raise PolicyBackendError(
                f"the observation lacks {missing or [self.keys.state, self.keys.prompt]}; it "
                f"must hold {[*wanted.values(), self.keys.state, self.keys.prompt]}"
            )
        images = {camera: self._image(message[key], key) for camera, key in wanted.items()}
        return images, message[self.keys.state], message[self.keys.prompt]

    def _image(self, image: object, key: str) -> np.ndarray:
        if not isinstance(image, np.ndarray) or image.dtype != np.uint8 or image.ndim != 3:
            raise PolicyBackendError(f"{key} must be a uint8 H x W x 3 array")
        size = self.model.image_size
        if image.shape[:2] == (size, size):
            return image
        # The client pads to a square (resize_with_pad); our frames are square renders.
        return cv2.resize(np.ascontiguousarray(image), (size, size), interpolation=cv2.INTER_AREA)


def _health(connection: ServerConnection, request):  # websockets' process_request hook
    """``GET /healthz``: 200 "OK" without a websocket upgrade (openpi's health check)."""
    if request.path == "/healthz":
        return connection.respond(HTTPStatus.OK, "OK\n")
    return None
