"""A stand-in for LeRobot's async-inference policy server, for CI (LeRobot's own environment is
5 GB and Python 3.12: ``scripts/lerobot_check.sh`` runs the real server before a release).

Speaks the same gRPC service (``transport.AsyncInference``) with the same payloads: it
unpickles the client's ``RemotePolicyConfig`` and ``TimedObservation`` as LeRobot's server
does (here into stand-in classes registered under LeRobot's module name, in this process
only), and answers ``GetActions`` with a pickled ``list[TimedAction]`` of torch tensor rows,
the format LeRobot's server sends (checked against a recorded real answer by the tests).

What it answers is read from ``--control`` at every request:

- ``follow [v1, ..., v6]``: 10 rows from the observed state to that target (the units sent);
- ``nan``, ``wrong_dim``: rows with NaN, rows of 7 values;
- ``file PATH``: those bytes as the pickle (a hostile fixture);
- ``empty``: an empty answer (what LeRobot's server sends when its policy fails);
- ``slow S``: sleep S seconds, then follow the last target.

Every request is appended to ``--log`` as a JSON line (method, and what it carried).

    python test/support/lerobot_server_double.py --port 18080 --control ctl.txt --log log.jsonl
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pickle
import socket
import subprocess
import sys
import time
import types
from concurrent import futures
from pathlib import Path

import grpc
import numpy as np

HELPERS = "lerobot.async_inference.helpers"


@dataclasses.dataclass
class RemotePolicyConfig:
    """A copy of LeRobot's dataclass (``helpers.RemotePolicyConfig``)."""

    policy_type: str
    pretrained_name_or_path: str
    lerobot_features: dict
    actions_per_chunk: int
    device: str = "cpu"
    rename_map: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class TimedObservation:
    """A copy of LeRobot's dataclass (``TimedData`` fields first)."""

    timestamp: float
    timestep: int
    observation: dict
    must_go: bool = False


@dataclasses.dataclass
class TimedAction:
    """A copy of LeRobot's dataclass: one row of an answer."""

    timestamp: float
    timestep: int
    action: object  # a torch.Tensor row (torch is imported only where rows are made)


def _register_lerobot_classes() -> types.ModuleType:
    """The copies above under LeRobot's names (in the double's own process only), so that
    ``pickle`` reads and writes them as LeRobot's server does."""
    module = types.ModuleType(HELPERS)
    for cls in (RemotePolicyConfig, TimedObservation, TimedAction):
        cls.__module__, cls.__qualname__ = HELPERS, cls.__name__
        setattr(module, cls.__name__, cls)
    for name in ("lerobot", "lerobot.async_inference"):
        sys.modules.setdefault(name, types.ModuleType(name))
    sys.modules[HELPERS] = module
    return module


def _field(message: bytes, number: int) -> bytes:
    """A bytes field of a serialized protobuf message (enough for these small messages)."""
    pos = 0
    while pos < len(message):
        key, pos = _varint(message, pos)
        if key & 7 == 0:
            _, pos = _varint(message, pos)
            continue
        length, pos = _varint(message, pos)
        if key >> 3 == number:
            return message[pos : pos + length]
        pos += length
    return b""


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        value |= (buf[pos] & 0x7F) << shift
        pos, shift = pos + 1, shift + 7
        if not buf[pos - 1] & 0x80:
            return value, pos


class Double:
    def __init__(self, control: Path, log: Path) -> None:
        self.helpers = _register_lerobot_classes()
        self.control, self.log = control, log
        self.observation = None
        self.target = None

    def record(self, entry: dict) -> None:
        with self.log.open("a") as out:
            out.write(json.dumps(entry) + "\n")

    def ready(self, request: bytes, context) -> bytes:
        self.record({"method": "Ready"})
        return b""

    def setup(self, request: bytes, context) -> bytes:
        config = pickle.loads(_field(request, 1))  # the real server does exactly this
        entry = dataclasses.asdict(config)
        entry["lerobot_features"] = json.loads(json.dumps(entry["lerobot_features"]))
        self.record({"method": "SendPolicyInstructions", **entry})
        return b""

    def observations(self, requests, context) -> bytes:
        payload = b"".join(_field(message, 2) for message in requests)
        observation = pickle.loads(payload)
        self.observation = observation
        values = observation.observation
        shapes = {k: list(v.shape) for k, v in values.items() if isinstance(v, np.ndarray)}
        scalars = {k: v for k, v in values.items() if isinstance(v, float | str)}
        self.record({"method": "SendObservations", "timestep": observation.timestep,
                     "must_go": observation.must_go, "images": shapes, "values": scalars,
                     "chunks": len(payload)})  # fmt: skip
        return b""

    def actions(self, request: bytes, context) -> bytes:
        mode, _, argument = self.control.read_text().strip().partition(" ")
        self.record({"method": "GetActions", "mode": mode})
        if mode == "empty" or self.observation is None:
            return b""
        if mode == "file":
            data = Path(argument).read_bytes()
        else:
            data = pickle.dumps(self._rows(mode, argument))
        return b"\x0a" + _encode_varint(len(data)) + data  # Actions{bytes data = 1}

    def _rows(self, mode: str, argument: str) -> list:
        if mode == "slow":
            time.sleep(float(argument))
        elif mode == "follow":
            self.target = np.array(json.loads(argument), np.float32)
        state = np.array([v for k, v in self.observation.observation.items()
                          if isinstance(v, float)], np.float32)  # fmt: skip
        target = self.target if self.target is not None else state
        rows = state + (target - state) * (np.arange(1, 11)[:, None] / 10.0)
        if mode == "nan":
            rows[3, 2] = np.nan
        if mode == "wrong_dim":
            rows = np.concatenate([rows, rows[:, :1]], axis=1)
        import torch  # the double's answers only: importing this module needs no torch

        tensor = torch.from_numpy(rows.astype(np.float32))
        start, step = self.observation.timestamp, self.observation.timestep
        cls = self.helpers.TimedAction
        return [cls(start + i / 30, step + i, row) for i, row in enumerate(list(tensor))]


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def serve(port: int, control: Path, log: Path) -> grpc.Server:
    double = Double(control, log)
    handlers = {
        "Ready": grpc.unary_unary_rpc_method_handler(double.ready),
        "SendPolicyInstructions": grpc.unary_unary_rpc_method_handler(double.setup),
        "SendObservations": grpc.stream_unary_rpc_method_handler(double.observations),
        "GetActions": grpc.unary_unary_rpc_method_handler(double.actions),
    }
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("transport.AsyncInference", handlers),)
    )
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    return server


class DoubleProcess:
    """The stand-in in a subprocess; ``mode`` sets what ``GetActions`` answers next."""

    def __init__(self, folder: Path, mode: str) -> None:
        self.port = free_port()
        self.control, self.log = folder / "control.txt", folder / "log.jsonl"
        self.mode(mode)
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--port", str(self.port),
             "--control", str(self.control), "--log", str(self.log)],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self.process.stdout.readline().strip() == "ready"

    def mode(self, text: str) -> None:
        self.control.write_text(text)

    def requests(self, method: str) -> list[dict]:
        if not self.log.exists():
            return []
        lines = [json.loads(line) for line in self.log.read_text().splitlines()]
        return [entry for entry in lines if entry["method"] == method]

    def stop(self) -> None:
        self.process.kill()
        self.process.wait(10)



def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--control", type=Path, required=True)
    parser.add_argument("--log", type=Path, required=True)
    args = parser.parse_args()
    import torch  # noqa: F401  # loaded before "ready": a busy machine takes seconds for it

    server = serve(args.port, args.control, args.log)
    print("ready", flush=True)
    server.wait_for_termination()


if __name__ == "__main__":
    main()
