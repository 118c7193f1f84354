"""The VLA policy backends against fake servers on 127.0.0.1 that speak each protocol.

The fakes encode and decode the wire formats with their own few lines (not ``wire``), the way
openpi's server and OpenVLA's ``deploy.py`` do: openpi is a websocket that sends a msgpack
metadata frame first and answers msgpack-numpy maps with ``actions``; OpenVLA is ``POST /act``
with json-numpy, which answers the JSON string "error" with HTTP 200 when inference fails.
"""

from __future__ import annotations

import base64
import contextlib
import http.server
import json
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

import msgpack
import numpy as np
import pytest
from support.openpi import FakeOpenPI, answer_actions, openpi_pack
from websockets.frames import CloseCode

from lang2policy.errors import ConfigError, PolicyBackendError
from lang2policy.vla.backends import (
    BackendSpec,
    OpenPIBackend,
    OpenPIKeys,
    OpenVLABackend,
    PolicyBackend,
    RemoteLimits,
    open_backend,
    parse_backend,
)

MODEL = Path(__file__).resolve().parents[2] / "models" / "vla-so101-tiny"
LIMITS = RemoteLimits(connect_s=1.0, request_s=0.5, max_answer_bytes=64 * 1024)
FAST = 1.5  # seconds: every refusal must come well within this
CHUNK = np.linspace(-1.0, 1.0, 60, dtype=np.float32).reshape(10, 6)
CHUNK[:, 5] = np.linspace(0.0, 1.0, 10)  # the gripper opening, 0..1
STATE = np.array([0.1, -0.2, 0.3, -0.4, 0.5, 0.6], np.float32)
INSTRUCTION = "pick up the red block"


def camera_images(height: int = 96, width: int = 96) -> dict[str, np.ndarray]:
    front = np.full((height, width, 3), 255, np.uint8)
    wrist = np.arange(height * width * 3).astype(np.uint8).reshape(height, width, 3)
    return {"front": front, "wrist": wrist}


def refused_within(seconds: float, call: Callable[[], object], match: str) -> str:
    """Run ``call``, which must raise ``PolicyBackendError`` matching ``match`` in time."""
    start = time.monotonic()
    with pytest.raises(PolicyBackendError, match=match) as info:
        call()
    elapsed = time.monotonic() - start
    assert elapsed < seconds, f"took {elapsed:.2f} s"
    return str(info.value)


def free_port() -> int:
    """A port where nothing listens (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]




@pytest.fixture
def openpi():
    servers = []

    def start(reply: Callable | None = None) -> tuple[FakeOpenPI, OpenPIBackend]:
        server = FakeOpenPI(reply or answer_actions(CHUNK))
        servers.append(server)
        return server, OpenPIBackend("127.0.0.1", server.port, limits=LIMITS)

    yield start
    for server in servers:
        server.close()


def test_openpi_chunk_comes_back_and_the_observation_has_openpi_keys(openpi):
    server, backend = openpi()
    images = camera_images(96, 128)  # not square: padded above and below
    chunk = backend.act_chunk(images, STATE, INSTRUCTION)
    assert chunk.dtype == np.float32 and chunk.shape == (10, 6)
    np.testing.assert_array_equal(chunk, CHUNK)
    assert backend.metadata == FakeOpenPI.METADATA
    sent = server.received[0]
    assert set(sent) == {
        "observation/image",
        "observation/wrist_image",
        "observation/state",
        "prompt",
    }
    front = sent["observation/image"]
    assert front.dtype == np.uint8 and front.shape == (224, 224, 3)
    assert (front[:20] == 0).all() and (front[-20:] == 0).all() and (front[112] == 255).all()
    assert sent["observation/state"].dtype == np.float32
    np.testing.assert_array_equal(sent["observation/state"], STATE)
    assert sent["prompt"] == INSTRUCTION
    backend.act_chunk(images, STATE, INSTRUCTION)
    assert server.connections == 1  # the connection is kept between requests
    backend.check_health()
    backend.close()


def test_openpi_keys_are_configurable_and_a_single_action_is_a_chunk_of_one(openpi):
    server, _ = openpi(answer_actions(np.array([0, 0, 0, 0, 0, 1.7])))  # float64, gripper > 1
    keys = OpenPIKeys(
        images={"wrist": "observation/wrist_image_left"},
        state="observation/joint_position",
        image_size=64,
    )
    backend = OpenPIBackend("127.0.0.1", server.port, keys=keys, limits=LIMITS)
    chunk = backend.act_chunk(camera_images(), STATE, INSTRUCTION)
    assert chunk.shape == (1, 6) and chunk.dtype == np.float32 and chunk[0, 5] == 1.0  # clipped
    sent = server.received[0]
    assert set(sent) == {"observation/wrist_image_left", "observation/joint_position", "prompt"}
    assert sent["observation/wrist_image_left"].shape == (64, 64, 3)
    with pytest.raises(ConfigError):
        OpenPIKeys(images={"front": "prompt"})


def test_openpi_slow_answer_times_out_then_the_next_request_reconnects(openpi):
    calls = []

    def slow_once(websocket, observation):
        calls.append(1)
        if len(calls) == 1:
            server.stop.wait(3.0)  # far past the 0.5 s request timeout
        actions = CHUNK.copy()
        actions[:, 0] = len(calls)  # says which request this answers
        websocket.send(openpi_pack({"actions": actions}))

    server, backend = openpi(slow_once)
    message = refused_within(
        FAST, lambda: backend.act_chunk(camera_images(), STATE, INSTRUCTION), "timeout"
    )
    assert "0.5 s" in message
    chunk = backend.act_chunk(camera_images(), STATE, INSTRUCTION)
    assert (chunk[:, 0] == 2).all()  # the new answer, never the late one
    assert server.connections == 2


@pytest.mark.parametrize(
    ("reply", "match"),
    [
        (lambda ws, obs: ws.send(b"\xc1\xc1 not msgpack"), "msgpack"),
        (lambda ws, obs: ws.send(openpi_pack([1, 2, 3])), "expected a map"),
        (lambda ws, obs: ws.send(openpi_pack({"action": CHUNK})), "no 'actions'.*'action'"),
        (answer_actions(np.zeros((10, 7), np.float32)), r"shape \(10, 7\); expected \(6,\)"),
        (answer_actions(np.where(CHUNK > 0.9, np.nan, CHUNK)), "NaN"),
        (answer_actions(np.full((2, 6), 1e39)), "NaN or infinite"),  # finite only in float64
        (answer_actions(np.zeros((10, 6), np.complex64)), "msgpack"),  # refused dtype
        (
            lambda ws, obs: ws.send(
                msgpack.packb(
                    {
                        "actions": {
                            b"__ndarray__": True,
                            b"data": b"1234",
                            b"dtype": "<f4",
                            b"shape": [10, 6],
                        }
                    }
                )
            ),
            "do not make an array",
        ),
    ],
    ids=[
        "bad-msgpack",
        "not-a-map",
        "no-actions",
        "wrong-shape",
        "nan",
        "overflow",
        "complex",
        "lying-header",
    ],
)
def test_openpi_malformed_answers_are_refused(openpi, reply, match):
    _, backend = openpi(reply)
    refused_within(FAST, lambda: backend.act_chunk(camera_images(), STATE, INSTRUCTION), match)


def test_openpi_server_error_text_frame_is_reported(openpi):
    def crash(websocket, observation):
        websocket.send("Traceback (most recent call last):\n  ...\nKeyError: 'observation/state'")
        websocket.close(CloseCode.INTERNAL_ERROR, "Internal server error")

    _, backend = openpi(crash)
    message = refused_within(
        FAST, lambda: backend.act_chunk(camera_images(), STATE, INSTRUCTION), "server failed"
    )
    assert "KeyError: 'observation/state'" in message


def test_openpi_oversized_answer_is_refused(openpi):
    _, backend = openpi(answer_actions(np.zeros((100_000, 6), np.float32)))  # 2.4 MB
    refused_within(
        FAST, lambda: backend.act_chunk(camera_images(), STATE, INSTRUCTION), "max_answer_bytes"
    )


def test_openpi_unreachable_server_and_a_stalled_handshake_fail_fast():
    backend = OpenPIBackend("127.0.0.1", free_port(), limits=LIMITS)
    refused_within(
        FAST, lambda: backend.act_chunk(camera_images(), STATE, INSTRUCTION), "cannot connect"
    )
    refused_within(FAST, backend.check_health, "cannot connect")
    with socket.socket() as silent:  # accepts TCP (in the backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        stalled = OpenPIBackend("127.0.0.1", silent.getsockname()[1], limits=LIMITS)
        refused_within(FAST, stalled.connect, "cannot connect within 1 s")


# ------------------------------------------------------------------ the fake OpenVLA server
def json_numpy(array: np.ndarray) -> dict:
    return {
        "__numpy__": base64.b64encode(array.tobytes()).decode(),
        "dtype": array.dtype.str,
        "shape": list(array.shape),
    }


def from_json_numpy(value: object) -> object:
    if isinstance(value, dict) and "__numpy__" in value:
        data = base64.b64decode(value["__numpy__"])
        return np.frombuffer(data, np.dtype(value["dtype"])).reshape(value["shape"])
    return value


def respond(handler, body: bytes, status: int = 200, length: int | None = None) -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body) if length is None else length))
    handler.end_headers()
    handler.wfile.write(body)


def answer_json(value: object) -> Callable:
    return lambda handler, payload: respond(handler, json.dumps(value).encode())


class FakeOpenVLA(http.server.ThreadingHTTPServer):
    """deploy.py's ``POST /act``: json-numpy in, ``JSONResponse(action)`` out."""

    daemon_threads = True

    def __init__(self, reply: Callable) -> None:
        self.reply = reply  # (handler, decoded payload) -> None: answers whatever it likes
        self.received: list[dict] = []
        self.stop = threading.Event()
        super().__init__(("127.0.0.1", 0), _ActHandler)
        self.port = self.server_address[1]
        threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True).start()

    def close(self) -> None:
        self.stop.set()
        self.shutdown()
        self.server_close()


class _ActHandler(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        payload = json.loads(body, object_hook=from_json_numpy)
        assert self.path == "/act" and self.headers["Content-Type"] == "application/json"
        self.server.received.append(payload)
        # The client may refuse an answer and hang up while it is being written.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.server.reply(self, payload)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def openvla():
    servers = []

    def start(reply: Callable, **options) -> tuple[FakeOpenVLA, OpenVLABackend]:
        server = FakeOpenVLA(reply)
        servers.append(server)
        return server, OpenVLABackend("127.0.0.1", server.port, limits=LIMITS, **options)

    yield start
    for server in servers:
        server.close()


def test_openvla_action_comes_back_and_the_request_is_deploy_py_shaped(openvla):
    server, backend = openvla(answer_json(json_numpy(CHUNK[3])), unnorm_key="so101_pick")
    images = camera_images()
    chunk = backend.act_chunk(images, STATE, INSTRUCTION)
    assert chunk.shape == (1, 6) and chunk.dtype == np.float32
    np.testing.assert_array_equal(chunk[0], CHUNK[3])
    payload = server.received[0]
    assert set(payload) == {"image", "instruction", "unnorm_key"}
    assert payload["image"].dtype == np.uint8
    np.testing.assert_array_equal(payload["image"], images["front"])  # sent as it is
    assert payload["instruction"] == INSTRUCTION and payload["unnorm_key"] == "so101_pick"


@pytest.mark.parametrize(
    "answer",
    [json_numpy(CHUNK.astype(np.float64)), [json_numpy(row) for row in CHUNK], CHUNK.tolist()],
    ids=["array", "list-of-arrays", "plain-lists"],
)
def test_openvla_chunks_in_each_answer_form(openvla, answer):
    server, backend = openvla(answer_json(answer), camera="wrist", image_size=224)
    chunk = backend.act_chunk(camera_images(), STATE, INSTRUCTION)
    np.testing.assert_allclose(chunk, CHUNK, rtol=1e-6)
    assert server.received[0]["image"].shape == (224, 224, 3)
    assert server.received[0]["unnorm_key"] is None


def test_openvla_error_string_with_http_200_is_an_error(openvla):
    _, backend = openvla(answer_json("error"))
    message = refused_within(
        FAST, lambda: backend.act_chunk(camera_images(), STATE, INSTRUCTION), '"error"'
    )
    assert "HTTP 200" in message


def trickle(handler, payload) -> None:
    """Headers at once, then one byte every 50 ms: each read is quick, the whole is not."""
    handler.send_response(200)
    handler.send_header("Content-Length", "1000")
    handler.end_headers()
    for _ in range(1000):
        handler.wfile.write(b" ")
        handler.wfile.flush()
        if handler.server.stop.wait(0.05):
            return


@pytest.mark.parametrize(
    "reply",
    [lambda handler, payload: handler.server.stop.wait(3.0), trickle],
    ids=["silent", "trickle"],
)
def test_openvla_slow_answer_times_out(openvla, reply):
    _, backend = openvla(reply)
    refused_within(
        FAST, lambda: backend.act_chunk(camera_images(), STATE, INSTRUCTION), "within 0.5 s"
    )


@pytest.mark.parametrize(
    ("reply", "match"),
    [
        (lambda handler, payload: respond(handler, b"{not json"), "not valid JSON"),
        (answer_json(json_numpy(np.zeros(7, np.float64))), r"shape \(7,\); expected \(6,\)"),
        (answer_json(json_numpy(np.array([0, 0, np.nan, 0, 0, 1.0]))), "NaN"),
        (answer_json([[1, 2, 3], [4, 5]]), "not a rectangular array"),
        (answer_json({"__numpy__": "!!", "dtype": "<f4", "shape": [6]}), "malformed"),
        (answer_json("something else"), "expected a json-numpy action"),
        (lambda handler, payload: respond(handler, b"Internal Server Error", 500), "HTTP 500"),
    ],
    ids=["bad-json", "7-dof", "nan", "ragged", "bad-base64", "other-string", "http-500"],
)
def test_openvla_malformed_answers_are_refused(openvla, reply, match):
    _, backend = openvla(reply)
    refused_within(FAST, lambda: backend.act_chunk(camera_images(), STATE, INSTRUCTION), match)


def endless(handler, payload) -> None:
    """HTTP/1.0 without Content-Length: the body runs until the server closes."""
    handler.send_response(200)
    handler.end_headers()
    for _ in range(64):  # 4 MB
        handler.wfile.write(b" " * 65536)


@pytest.mark.parametrize(
    ("reply", "match"),
    [
        (lambda handler, payload: respond(handler, b"[]", length=50_000_000), "Content-Length"),
        (endless, "over 65536 bytes"),
    ],
    ids=["declared", "undeclared"],
)
def test_openvla_oversized_answer_is_refused(openvla, reply, match):
    _, backend = openvla(reply)
    refused_within(FAST, lambda: backend.act_chunk(camera_images(), STATE, INSTRUCTION), match)


def test_openvla_unreachable_server_fails_fast():
    backend = OpenVLABackend("127.0.0.1", free_port(), limits=LIMITS)
    refused_within(
        FAST, lambda: backend.act_chunk(camera_images(), STATE, INSTRUCTION), "cannot connect"
    )


def test_bad_observations_are_refused_before_sending(openvla):
    server, backend = openvla(answer_json(json_numpy(CHUNK)))
    bad = [
        ({"wrist": camera_images()["wrist"]}, STATE, INSTRUCTION, "missing camera"),
        ({"front": np.zeros((8, 8, 3), np.float32)}, STATE, INSTRUCTION, "uint8"),
        (camera_images(), np.array([0, 0, np.nan, 0, 0, 0]), INSTRUCTION, "NaN"),
        (camera_images(), STATE[:5], INSTRUCTION, "shape"),
        (camera_images(), STATE, "  ", "instruction"),
    ]
    for images, state, instruction, match in bad:
        with pytest.raises(PolicyBackendError, match=match):
            backend.act_chunk(images, state, instruction)
    assert server.received == []


# ------------------------------------------------------------------ choosing a backend
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("local", BackendSpec("local")),
        ("  LOCAL ", BackendSpec("local")),
        ("openpi://127.0.0.1:8000", BackendSpec("openpi", "127.0.0.1", 8000)),
        ("openvla://gpu-box.lan:8777/", BackendSpec("openvla", "gpu-box.lan", 8777)),
        ("OpenPI://[::1]:9000", BackendSpec("openpi", "::1", 9000)),
    ],
)
def test_backend_settings_that_parse(text, expected):
    spec = parse_backend(text)
    assert spec == expected
    assert parse_backend(str(spec)) == spec


@pytest.mark.parametrize(
    "text",
    [
        "",
        "remote",
        "openpi",
        "openpi://",
        "openpi://127.0.0.1",
        "openpi://:8000",
        "openpi://host:0",
        "openpi://host:70000",
        "openpi://host:80/act",
        "openpi://u@host:80",
        "openpi://host:80?x=1",
        "ws://127.0.0.1:8000",
        "http://127.0.0.1:8000",
        "openvla://bad_host:80",
        "openvla://999.1.1.1:80",
        "openpi://[not-ipv6]:80",
        "openpi://host:+80",
        "local:models/x",
        8000,
        None,
    ],
)
def test_backend_settings_that_do_not_parse(text):
    with pytest.raises(ConfigError, match=r"expected|not a|port|must be"):
        parse_backend(text)


def test_open_backend_builds_remote_backends_without_connecting():
    openpi_backend = open_backend("openpi://127.0.0.1:1", limits=LIMITS)
    openvla_backend = open_backend("openvla://127.0.0.1:2", unnorm_key="so101")
    assert (
        isinstance(openpi_backend, OpenPIBackend) and openpi_backend.name == "openpi://127.0.0.1:1"
    )
    assert isinstance(openvla_backend, OpenVLABackend) and openvla_backend.unnorm_key == "so101"
    assert isinstance(openpi_backend, PolicyBackend) and isinstance(openvla_backend, PolicyBackend)
    assert openpi_backend.cameras == ("front", "wrist") and openvla_backend.cameras == ("front",)


def test_local_backend_runs_the_shipped_checkpoint(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the instruction encoder is bundled
    backend = open_backend("local", model_dir=MODEL)
    assert isinstance(backend, PolicyBackend) and backend.name == "local"
    images = {camera: np.zeros((96, 96, 3), np.uint8) for camera in backend.cameras}
    chunk = backend.act_chunk(images, np.zeros(6, np.float32), "pick up the red block")
    assert chunk.dtype == np.float32 and chunk.shape == (10, 6)
    assert np.isfinite(chunk).all() and ((chunk[:, 5] >= 0) & (chunk[:, 5] <= 1)).all()
    with pytest.raises(PolicyBackendError, match="resize"):
        backend.act_chunk(camera_images(64, 64), STATE, INSTRUCTION)
    backend.reset()
    backend.close()
