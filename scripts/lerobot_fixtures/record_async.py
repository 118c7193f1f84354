"""Record LeRobot async-inference fixtures from LeRobot's own code, and cross-check our codec.

Runs in LeRobot's environment (``.venv-lerobot``, Python 3.12, lerobot 0.6.1, torch):

    .venv-lerobot/bin/python scripts/lerobot_fixtures/record_async.py

Writes ``test/fixtures/lerobot_async/``:

- ``actions_10x6.pkl``: ``pickle.dumps`` of a real ``list[TimedAction]`` made the way
  ``PolicyServer._predict_action_chunk`` makes it (rows of a ``.detach().cpu()`` float32 tensor,
  timed like ``_time_action_chunk``); ``actions_10x6.pb``: that pickle in a serialized
  ``services_pb2.Actions``; ``empty.pb``: a serialized ``services_pb2.Empty``;
  ``actions_10x6.json``: the values, timesteps and timestamps they hold.
- ``hostile_*.pkl``: answers our reader must refuse (an ``os.system`` reduce, huge tensor and
  storage headers, NaN actions, a wrong action dim, timesteps going back, a nested-list bomb, a
  huge memo index, a shared-tuple dict key whose hash takes 2**40 steps).
- ``cross_check.json``: our ``lerobot_wire`` module (loaded by path: our package's other modules
  need Python 3.11-only packages) checked against LeRobot: its ``pickle.loads`` turns our
  ``policy_setup_pickle`` / ``timed_observation_pickle`` bytes into ``RemotePolicyConfig`` /
  ``TimedObservation`` with equal fields, our protobuf bytes equal ``services_pb2``'s, our chunk
  framing equals ``send_bytes_in_chunks``'s, LeRobot's real ``PolicyServer.SendObservations``
  queues our framed observation. It keeps the inputs and our bytes, so the tests
  (which cannot import lerobot) can check that our writers still make what LeRobot accepted.

Exits 1 when any cross-check fails.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import os
import pickle
import sys
import tempfile
from collections import OrderedDict
from pathlib import Path

import lerobot
import numpy as np
import torch
from lerobot.async_inference import constants
from lerobot.async_inference.helpers import RemotePolicyConfig, TimedAction, TimedObservation
from lerobot.transport import services_pb2
from lerobot.transport import utils as transport_utils
from lerobot.utils.feature_utils import hw_to_dataset_features

REPO = Path(__file__).resolve().parents[2]
# $LEROBOT_FIXTURES_OUT: write elsewhere (the live test re-checks without touching the fixtures)
OUT = Path(os.environ.get("LEROBOT_FIXTURES_OUT", REPO / "test" / "fixtures" / "lerobot_async"))
WIRE_PATH = REPO / "lang2policy" / "vla" / "backends" / "lerobot_wire.py"
ANSWER_PATH = WIRE_PATH.with_name("lerobot_answer.py")
ROWS, DIM, T0, DT, STEP0 = 10, 6, 1700000000.25, 1 / 30, 42
MOTORS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")
IMAGE_SHAPE = (4, 6, 3)
# (payload size, chunk size): framing cases, small chunks by patching LeRobot's CHUNK_SIZE
FRAMING_CASES = [(1, 7), (6, 7), (7, 7), (8, 7), (14, 7), (15, 7), (22, 7), (300, 64)]
FRAMING_CASES += [(2 * 1024 * 1024, None), (2 * 1024 * 1024 + 1, None), (5 * 1024 * 1024, None)]


def load_wire(path: Path = WIRE_PATH):
    """Our ``lerobot_wire.py`` (or ``lerobot_answer.py``), loaded by path (numpy + errors only)."""
    sys.path.insert(0, str(REPO))  # for lang2policy.errors (lang2policy/__init__ imports os only)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def action_tensor() -> torch.Tensor:
    """Deterministic ``[ROWS, DIM]`` float32 actions (joint targets in degrees, gripper 0..100)."""
    t = torch.arange(ROWS, dtype=torch.float64)[:, None]
    j = torch.arange(DIM, dtype=torch.float64)[None, :]
    return (30 * torch.sin(0.3 * t + j) + 5 * j).to(torch.float32)


def time_chunk(actions: list, t0: float = T0, step0: int = STEP0) -> list[TimedAction]:
    """``PolicyServer._time_action_chunk``: the i-th row at ``t0 + i * dt``, timestep ``i0 + i``."""
    return [
        TimedAction(timestamp=t0 + i * DT, timestep=step0 + i, action=action)
        for i, action in enumerate(actions)
    ]


def server_chunk(tensor: torch.Tensor) -> list[TimedAction]:
    """What the server pickles: rows of the detached CPU tensor, timed."""
    return time_chunk(list(tensor.detach().cpu()))


class Reduce:
    """An object that pickles as ``func(*args)``: how hostile answers are made."""

    def __init__(self, func, args) -> None:
        self.func, self.args = func, args

    def __reduce__(self):
        return self.func, self.args


def legacy_storage_bytes(numel_claim: int) -> bytes:
    """A real storage's ``_load_from_bytes`` payload (legacy ``torch.save``) whose element count,
    in its storage record and its int64 header, is rewritten to ``numel_claim``."""
    payload = torch.arange(6, dtype=torch.float32)._typed_storage().__reduce__()[1][0]
    head, raw = payload[: -(6 * 4 + 8)], payload[-6 * 4 :]
    claim = pickle.dumps(numel_claim, protocol=2)[2:-1]
    assert head.count(b"K\x06Nt") == 1, "legacy storage record changed shape"
    head = head.replace(b"K\x06Nt", claim + b"Nt")
    return head + numel_claim.to_bytes(8, "little", signed=True) + raw


def tuple_key_bomb(levels: int) -> bytes:
    """``{t: None}`` where ``t`` nests ``levels`` tuples of two shared halves: tiny, but hashing
    it (what ``pickle.loads`` does to a dict key) takes ``2 ** levels`` steps. Never loaded here."""
    out = b"\x80\x02K\x01K\x01\x86r" + (0).to_bytes(4, "little")
    for i in range(1, levels):
        get = b"j" + (i - 1).to_bytes(4, "little")
        out += get + get + b"\x86r" + i.to_bytes(4, "little")
    return out + b"0}j" + (levels - 1).to_bytes(4, "little") + b"Ns."


def hostile() -> dict[str, bytes]:
    """Answers our reader must refuse, each made by pickle/torch here."""
    good = action_tensor()
    hooks = OrderedDict()
    rebuild = torch._utils._rebuild_tensor_v2
    huge_view = Reduce(rebuild, (good[0]._typed_storage(), 0, (10**12,), (1,), False, hooks))
    huge_storage = Reduce(torch.storage._load_from_bytes, (legacy_storage_bytes(10**12),))
    on_huge_storage = Reduce(rebuild, (huge_storage, 0, (6,), (1,), False, hooks))
    nan = good.clone()
    nan[3, 2] = float("nan")
    back = time_chunk(list(good))
    back[5].timestep = back[4].timestep
    depth = 3000
    return {
        "hostile_os_system.pkl": pickle.dumps([Reduce(os.system, ("echo pwned",))]),
        "hostile_huge_tensor.pkl": pickle.dumps(time_chunk([huge_view])),
        "hostile_huge_storage.pkl": pickle.dumps(time_chunk([on_huge_storage])),
        "hostile_nan.pkl": pickle.dumps(server_chunk(nan)),
        "hostile_wrong_dim.pkl": pickle.dumps(server_chunk(torch.zeros(ROWS, DIM + 1))),
        "hostile_timestep_back.pkl": pickle.dumps(back),
        "hostile_nested_list.pkl": b"\x80\x04" + b"]" * depth + b"a" * (depth - 1) + b".",
        "hostile_memo_index.pkl": b"\x80\x02]r\xff\xff\xff\x7f.",
        "hostile_tuple_key.pkl": tuple_key_bomb(40),
    }


def features() -> dict:
    """``map_robot_keys_to_lerobot_features`` of an SO-101 with one small front camera."""
    hw = {f"{m}.pos": float for m in MOTORS} | {"front": IMAGE_SHAPE}
    return hw_to_dataset_features(hw, "observation", use_video=False)


def observation() -> dict:
    """A raw observation as ``robot.get_observation()`` + the task, as the client sends it."""
    image = (np.arange(np.prod(IMAGE_SHAPE)) % 251).astype(np.uint8).reshape(IMAGE_SHAPE)
    obs = {f"{m}.pos": 10.5 * i - 20.25 for i, m in enumerate(MOTORS)}
    return obs | {"front": image, "task": "pick up the red cube"}


def check_policy_setup(wire) -> dict:
    """Our RemotePolicyConfig pickle, loaded by LeRobot's pickle.loads, equals LeRobot's own."""
    args = ("act", "user/act_so101", features(), 20, "cuda", {"observation.images.front": "x"})
    args = ast.literal_eval(repr(args))  # no shared objects: the tests rebuild it from its repr
    ours = wire.policy_setup_pickle(*args)
    loaded = pickle.loads(ours)
    theirs = RemotePolicyConfig(*args)
    message = services_pb2.PolicySetup(data=ours).SerializeToString()
    return {
        "inputs_repr": repr(args),
        "our_pickle_hex": ours.hex(),
        "isinstance": isinstance(loaded, RemotePolicyConfig),
        "equal": loaded == theirs,
        "same_types": {k: type(v).__name__ for k, v in vars(loaded).items()}
        == {k: type(v).__name__ for k, v in vars(theirs).items()},
        "message_equal": wire.encode_policy_setup(ours) == message,
    }


def check_observation(wire) -> dict:
    """Our TimedObservation pickle, loaded by LeRobot, equals the client's own object."""
    obs = observation()
    ours = wire.timed_observation_pickle(T0, STEP0, obs, must_go=True)
    loaded = pickle.loads(ours)
    theirs = TimedObservation(timestamp=T0, timestep=STEP0, observation=obs, must_go=True)
    plain = {k: v for k, v in obs.items() if k != "front"}
    return {
        "our_pickle_hex": ours.hex(),
        "isinstance": isinstance(loaded, TimedObservation),
        "fields_equal": (loaded.timestamp, loaded.timestep, loaded.must_go)
        == (theirs.timestamp, theirs.timestep, theirs.must_go),
        "observation_equal": {k: v for k, v in loaded.observation.items() if k != "front"} == plain,
        "image_equal": bool(
            isinstance(loaded.observation["front"], np.ndarray)
            and loaded.observation["front"].dtype == np.uint8
            and np.array_equal(loaded.observation["front"], obs["front"])
        ),
        "keys_equal": list(loaded.observation) == list(obs),
    }


def check_server(wire) -> dict:
    """LeRobot's real ``PolicyServer.SendObservations`` takes our framed TimedObservation (64-byte
    chunks: BEGIN, MIDDLE..., END) and queues it for inference, equal to what we sent."""
    cwd = Path.cwd()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)  # the server module writes logs/ into the working directory on import
        try:
            from lerobot.async_inference.configs import PolicyServerConfig
            from lerobot.async_inference.policy_server import PolicyServer

            server = PolicyServer(PolicyServerConfig())
            obs = observation()
            ours = wire.timed_observation_pickle(T0, STEP0, obs, must_go=True)
            chunks = wire.encode_observation_chunks(ours, 64)
            stream = (services_pb2.Observation.FromString(m) for m in chunks)
            reply = server.SendObservations(stream, _Context())
            queued = server.observation_queue.get_nowait()
        finally:
            os.chdir(cwd)
    return {
        "chunks": len(chunks),
        "replied_empty": type(reply).__name__ == "Empty",
        "queued_timed_observation": isinstance(queued, TimedObservation),
        "queued_equal": (queued.timestamp, queued.timestep, queued.must_go) == (T0, STEP0, True)
        and np.array_equal(queued.observation["front"], obs["front"])
        and queued.observation["task"] == obs["task"],
    }


class _Context:
    """The gRPC servicer context, as much as SendObservations uses."""

    def peer(self) -> str:
        return "record_async"


def framing_payload(size: int) -> bytes:
    """Deterministic payload bytes for a framing case."""
    return bytes((i * 7 + 3) % 256 for i in range(size)) if size < 4096 else os.urandom(size)


def check_framing(wire) -> list[dict]:
    """Our Observation chunk messages equal those LeRobot's send_bytes_in_chunks yields."""
    cases, default = [], transport_utils.CHUNK_SIZE
    for size, chunk in FRAMING_CASES:
        payload = framing_payload(size)
        transport_utils.CHUNK_SIZE = chunk or default
        try:
            theirs = [
                m.SerializeToString()
                for m in transport_utils.send_bytes_in_chunks(payload, services_pb2.Observation)
            ]
        finally:
            transport_utils.CHUNK_SIZE = default
        ours = wire.encode_observation_chunks(payload, chunk or wire.CHUNK_SIZE)
        digest = hashlib.sha256(b"".join(theirs)).hexdigest() if size < 4096 else None
        cases.append(
            {
                "size": size,
                "chunk_size": chunk,
                "messages": len(theirs),
                "states": [services_pb2.Observation.FromString(m).transfer_state for m in theirs],
                "lerobot_sha256": digest,
                "equal": ours == theirs,
            }
        )
    return cases


def check_constants(wire) -> dict:
    """Our copies of LeRobot's constants still equal LeRobot's."""
    states = services_pb2.TransferState
    return {
        "chunk_size": wire.CHUNK_SIZE == transport_utils.CHUNK_SIZE,
        "max_message_size": wire.MAX_MESSAGE_SIZE == transport_utils.MAX_MESSAGE_SIZE,
        "transfer_states": (wire.TRANSFER_BEGIN, wire.TRANSFER_MIDDLE, wire.TRANSFER_END)
        == (states.TRANSFER_BEGIN, states.TRANSFER_MIDDLE, states.TRANSFER_END),
        "supported_policies": list(wire.SUPPORTED_POLICIES) == list(constants.SUPPORTED_POLICIES),
        "setup_fields": list(wire.SETUP_FIELDS) == list(RemotePolicyConfig.__dataclass_fields__),
    }


def record_actions(wire) -> dict:
    """The real answer fixtures, and our reader's view of them (checked here too)."""
    tensor = action_tensor()
    answer = pickle.dumps(server_chunk(tensor))
    (OUT / "actions_10x6.pkl").write_bytes(answer)
    (OUT / "actions_10x6.pb").write_bytes(services_pb2.Actions(data=answer).SerializeToString())
    (OUT / "empty.pb").write_bytes(services_pb2.Empty().SerializeToString())
    chunk = server_chunk(tensor)
    expected = {
        "actions": [[float(x) for x in row] for row in tensor],
        "timesteps": [a.timestep for a in chunk],
        "timestamps": [a.timestamp for a in chunk],
    }
    (OUT / "actions_10x6.json").write_text(json.dumps(expected, indent=1) + "\n")
    reader = load_wire(ANSWER_PATH)
    actions, steps, stamps = reader.read_action_chunk(answer, len(answer), ROWS, DIM)
    return {
        "our_reader_equal": bool(np.array_equal(actions, tensor.numpy()))
        and steps == expected["timesteps"]
        and stamps == expected["timestamps"],
        "decode_actions_equal": wire.decode_actions((OUT / "actions_10x6.pb").read_bytes(), 1 << 20)
        == answer,
    }


def flags(report: dict) -> list[bool]:
    """Every boolean in the report (all must be true)."""
    if isinstance(report, dict):
        return [f for v in report.values() for f in flags(v)]
    if isinstance(report, list):
        return [f for v in report for f in flags(v)]
    return [report] if isinstance(report, bool) else []


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    wire = load_wire()
    for name, blob in hostile().items():
        (OUT / name).write_bytes(blob)
    report = {
        "versions": {
            "lerobot": lerobot.__version__,
            "torch": torch.__version__,
            "numpy": np.__version__,
            "python": sys.version.split()[0],
        },
        "actions": record_actions(wire),
        "policy_setup": check_policy_setup(wire),
        "timed_observation": check_observation(wire),
        "framing": check_framing(wire),
        "policy_server": check_server(wire),
        "constants": check_constants(wire),
    }
    report["all_ok"] = all(flags(report))
    (OUT / "cross_check.json").write_text(json.dumps(report, indent=1) + "\n")
    for path in sorted(OUT.iterdir()):
        print(f"{path.stat().st_size:8d}  {path}")
    print("cross-check:", "all ok" if report["all_ok"] else "FAILED")
    return 0 if report["all_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
