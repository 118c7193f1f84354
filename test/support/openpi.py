"""A stand-in for openpi's websocket policy server on 127.0.0.1 (metadata frame on connect,
then observation -> answer), with openpi's msgpack array layout. Shared by the VLA backend and
loader-bounds tests."""

from __future__ import annotations

import threading
from collections.abc import Callable
from http import HTTPStatus
from typing import ClassVar

import msgpack
import numpy as np
from websockets.exceptions import ConnectionClosed
from websockets.sync.server import serve


# ------------------------------------------------------------------ the fake openpi server
def openpi_pack(value: object) -> bytes:
    """msgpack with openpi's array layout (bin marker keys, dtype.str, C-order bytes)."""

    def arrays(obj: object) -> object:
        if isinstance(obj, np.ndarray):
            return {
                b"__ndarray__": True,
                b"data": obj.tobytes(),
                b"dtype": obj.dtype.str,
                b"shape": obj.shape,
            }
        raise TypeError(type(obj))

    return msgpack.packb(value, default=arrays)


def openpi_unpack(data: bytes) -> object:
    def arrays(obj: dict) -> object:
        if b"__ndarray__" not in obj:
            return obj
        dtype, shape = np.dtype(obj[b"dtype"]), tuple(obj[b"shape"])
        return np.frombuffer(obj[b"data"], dtype).reshape(shape)

    return msgpack.unpackb(data, object_hook=arrays)


def answer_actions(actions: np.ndarray) -> Callable:
    """A reply as openpi's server makes it: the chunk and the server's timing."""
    answer = {"actions": actions, "server_timing": {"infer_ms": 1.0}}
    return lambda websocket, observation: websocket.send(openpi_pack(answer))


class FakeOpenPI:
    """openpi's websocket policy server: metadata frame on connect, then obs -> answer."""

    METADATA: ClassVar[dict] = {"robot": "so101", "action_horizon": 10}

    def __init__(self, reply: Callable) -> None:
        self.reply = reply  # (websocket, observation) -> None: sends whatever it likes
        self.received: list[dict] = []
        self.connections = 0
        self.stop = threading.Event()
        self.server = serve(
            self._handle,
            "127.0.0.1",
            0,
            compression=None,
            max_size=None,
            process_request=self._health,
        )
        self.port = self.server.socket.getsockname()[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def _health(self, connection, request):
        if request.path == "/healthz":
            return connection.respond(HTTPStatus.OK, "OK\n")
        return None

    def _handle(self, websocket) -> None:
        self.connections += 1
        websocket.send(openpi_pack(self.METADATA))
        try:
            for message in websocket:
                observation = openpi_unpack(message)
                self.received.append(observation)
                self.reply(websocket, observation)
        except ConnectionClosed:
            pass

    def close(self) -> None:
        self.stop.set()
        self.server.shutdown()
