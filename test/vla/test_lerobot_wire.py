"""LeRobot async-inference codec (``lang2policy.vla.backends.lerobot_wire``) against fixtures
recorded from LeRobot 0.6.1's own code (``scripts/lerobot_fixtures/record_async.py``, run in
``.venv-lerobot``). These tests run in our env, without lerobot: they read LeRobot's real answer,
refuse hostile ones, and check that our writers still produce the bytes LeRobot accepted."""

from __future__ import annotations

import ast
import hashlib
import json
import os
import pickle
import pickletools
import struct
from pathlib import Path

import numpy as np
import pytest
from support.lerobot_server_double import RemotePolicyConfig, TimedObservation

from lang2policy.errors import PolicyBackendError
from lang2policy.vla.backends import lerobot_answer as answer
from lang2policy.vla.backends import lerobot_wire as wire

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "lerobot_async"
REPORT = json.loads((FIXTURES / "cross_check.json").read_text())
EXPECTED = json.loads((FIXTURES / "actions_10x6.json").read_text())
ANSWER = (FIXTURES / "actions_10x6.pkl").read_bytes()
LIMIT = 1 << 20
# The observation record_async.py sent (its observation()): keep the two in step.
MOTORS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")
IMAGE_SHAPE = (4, 6, 3)
T0, STEP0 = 1700000000.25, 42


def read(data: bytes, max_rows: int = 50, action_dim: int = 6):
    return answer.read_action_chunk(data, LIMIT, max_rows, action_dim)


def answer_of(*states: dict) -> bytes:
    """A pickled list of ``helpers.TimedAction`` built from ``states`` (as LeRobot names it)."""
    items = b"".join(wire._class_pickle("TimedAction", s)[2:-1] + b"a" for s in states)
    return b"\x80\x03]" + items + b"."


# ------------------------------------------------------------------ LeRobot's real answer
def test_reads_lerobots_real_action_chunk():
    actions, steps, stamps = read(ANSWER, max_rows=10)
    assert actions.dtype == np.float32 and actions.shape == (10, 6)
    np.testing.assert_array_equal(actions, np.array(EXPECTED["actions"], dtype=np.float32))
    assert steps == EXPECTED["timesteps"] == list(range(42, 52))
    assert stamps == EXPECTED["timestamps"]


def _text(value: str) -> bytes:
    return b"X" + struct.pack("<I", len(value)) + value.encode()


def long_answer(rows: int) -> bytes:
    """``rows`` TimedActions laid out as CPython pickles LeRobot's list (one MARK ... APPENDS
    batch), each row a view of the real fixture's legacy-saved 60-float storage."""
    payload = next(arg for op, arg, _ in pickletools.genops(ANSWER) if op.name == "BINBYTES")
    hooks = b"ccollections\nOrderedDict\n)R"
    out = b"\x80\x02](" + b"".join(
        b"clerobot.async_inference.helpers\nTimedAction\n)\x81}("
        + _text("timestamp") + b"G" + struct.pack(">d", T0 + i / 30)
        + _text("timestep") + b"J" + struct.pack("<i", STEP0 + i)
        + _text("action") + b"ctorch._utils\n_rebuild_tensor_v2\n("
        + b"ctorch.storage\n_load_from_bytes\n"
        + b"B" + struct.pack("<I", len(payload)) + payload + b"\x85R"
        + b"J" + struct.pack("<i", 6 * (i % 10)) + b"K\x06\x85K\x01\x85\x89" + hooks + b"tRub"
        for i in range(rows)
    )  # fmt: skip
    return out + b"e."


def test_reads_a_long_chunk_in_one_appends_batch():
    actions, steps, _ = read(long_answer(100), max_rows=100)
    expected = np.array(EXPECTED["actions"], dtype=np.float32)
    np.testing.assert_array_equal(actions, np.concatenate([expected] * 10))
    assert steps == list(range(STEP0, STEP0 + 100))
    with pytest.raises(PolicyBackendError, match="at most 100"):
        read(long_answer(101), max_rows=100, action_dim=7)


def test_decodes_lerobots_actions_and_empty_messages():
    message = (FIXTURES / "actions_10x6.pb").read_bytes()
    assert wire.decode_actions(message, LIMIT) == ANSWER
    assert wire.decode_fields(message, LIMIT) == {1: ANSWER}
    empty = (FIXTURES / "empty.pb").read_bytes()
    assert empty == b"" and wire.decode_actions(empty, LIMIT) == b""


def test_decode_refuses_oversized_and_malformed_messages():
    message = (FIXTURES / "actions_10x6.pb").read_bytes()
    with pytest.raises(PolicyBackendError, match=r"of 5722 bytes; at most 5000 allowed"):
        wire.decode_actions(message, 5000)
    cases = {
        message[:-1]: "field 1 claims 5719 bytes past the end",
        b"\x0a\xff": "ends inside a varint",
        b"\x08" + b"\xff" * 11: "longer than 10 bytes",
        b"\x0d\x00\x00\x00\x00": "wire type 5",
        b"\x02\x00": "field 0",
        b"\x08\x01": "is a varint; a bytes field",
    }
    for bad, why in cases.items():
        with pytest.raises(PolicyBackendError, match=why):
            wire.decode_actions(bad, LIMIT)


def test_read_enforces_the_callers_limits():
    with pytest.raises(PolicyBackendError, match=r"5719 bytes; 1 to 5000 are allowed"):
        answer.read_action_chunk(ANSWER, 5000, 10, 6)
    with pytest.raises(PolicyBackendError, match="at most 9"):
        read(ANSWER, max_rows=9, action_dim=7)
    with pytest.raises(PolicyBackendError, match=r"storage of 60 elements.*at most 54"):
        read(ANSWER, max_rows=9)
    with pytest.raises(PolicyBackendError, match=r"has shape \(6,\); a tensor \(7,\)"):
        read(ANSWER, action_dim=7)
    with pytest.raises(PolicyBackendError, match="1 to"):
        read(b"")
    with pytest.raises(PolicyBackendError, match="positive ints"):
        answer.read_action_chunk(ANSWER, LIMIT, 0, 6)


# ------------------------------------------------------------------ hostile answers
HOSTILE = {
    "hostile_os_system.pkl": r"global posix\.system; allowed: collections\.OrderedDict, "
    r"lerobot\.async_inference\.helpers\.TimedAction, torch\._utils\._rebuild_tensor_v2, "
    r"torch\.storage\._load_from_bytes$",
    "hostile_huge_tensor.pkl": r"tensor of 1000000000000 elements; at most 300 allowed",
    "hostile_huge_storage.pkl": r"storage of 1000000000000 elements .*at most 300",
    "hostile_nan.pkl": r"action 3 holds NaN or inf",
    "hostile_wrong_dim.pkl": r"action 0 has shape \(7,\); a tensor \(6,\) is required",
    "hostile_timestep_back.pkl": r"item 5 goes back \(timestep 46 after 46\)",
    "hostile_nested_list.pkl": r"pickle stack deeper than 114 .*nested too deep",
    "hostile_memo_index.pkl": r"LONG_BINPUT 2147483647 .*memo indices <= 9",
    "hostile_tuple_key.pkl": r"SETITEM .*dict key that is not a str",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_refuses_hostile_answer(name, capfd):
    with pytest.raises(PolicyBackendError, match=HOSTILE[name]):
        read((FIXTURES / name).read_bytes())
    assert "pwned" not in capfd.readouterr().out


def test_every_hostile_fixture_is_tested():
    assert sorted(p.name for p in FIXTURES.glob("hostile_*.pkl")) == sorted(HOSTILE)


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"\x80\x02cbuiltins\neval\nX\x03\x00\x00\x001+1\x85R.", r"global builtins\.eval"),
        (b"\x80\x02csubprocess\nPopen\n.", r"global subprocess\.Popen"),
        (b"\x80\x04\x8c\x02os\x8c\x06system\x93.", r"global os\.system"),
        (b"\x80\x02ctorch\nFloatStorage\n.", r"global torch\.FloatStorage"),
        (pickle.dumps(np.zeros(6, np.float32)), r"global numpy\._core\.multiarray\._reconstruct"),
        (pickle.dumps({"a": 1}), r"the answer is a dict; a non-empty list of TimedAction"),
        (pickle.dumps([]), r"an empty list"),
        (pickle.dumps([1.0]), r"item 0 is a float; a TimedAction is required"),
        (pickle.dumps(frozenset()), r"FROZENSET"),
        (pickle.dumps([[]]) + b"junk", r"4 bytes follow the pickle's STOP"),
        (b"\x80\x02]\x94", r"not a valid pickle"),
        (b"\x80\x02(((.", r"STOP at byte 5 pops more than the stack holds"),
        (b"\x80\x02e.", r"pops more than the stack holds"),
        (b"\x80\x02Q.", r"BINPERSID at byte 2 pops more"),
        (b"\x80\x02}(K\x01K\x02\x86K\x01u.", r"SETITEMS at byte 11 sets a dict key that is not"),
        (b"\x80\x02}X\x01\x00\x00\x00aq\x00(h\x00K\x01u.", r"not a valid pickle"),
    ],
)
def test_refuses_forged_answers(data, why):
    with pytest.raises(PolicyBackendError, match=why):
        read(data)


def test_refuses_bad_timed_action_fields():
    cases = [
        ({"timestamp": 1.0, "timestep": 1, "action": 0.0, "x": 1}, "TimedAction state a dict"),
        ({"timestamp": 1.0, "timestep": -1, "action": 0.0}, "timestep -1; an int in 0"),
        ({"timestamp": 1.0, "timestep": "1", "action": 0.0}, "timestep '1'; an int in 0"),
        ({"timestamp": float("inf"), "timestep": 1, "action": 0.0}, "timestamp inf; a finite"),
        ({"timestamp": 1.0, "timestep": True, "action": 0.0}, "timestep True; an int in 0"),
        (
            {"timestamp": 1.0, "timestep": 1, "action": [0.0] * 6},
            r"has shape list; a tensor \(6,\)",
        ),
        ({"timestamp": 1.0, "timestep": 1, "action": 0.0}, r"has shape float; a tensor \(6,\)"),
    ]
    for state, why in cases:
        with pytest.raises(PolicyBackendError, match=why):
            read(answer_of(state))


def test_timestamps_must_not_go_back():
    first, second = (struct.pack(">d", t) for t in EXPECTED["timestamps"][:2])
    assert ANSWER.count(b"G" + second) == 1
    earlier = ANSWER.replace(b"G" + second, b"G" + struct.pack(">d", EXPECTED["timestamps"][0] - 1))
    with pytest.raises(PolicyBackendError, match=r"item 1 goes back .*timestamps must not"):
        read(earlier)
    same = ANSWER.replace(b"G" + second, b"G" + first)
    assert read(same)[2][:2] == [EXPECTED["timestamps"][0]] * 2


# ------------------------------------------------------------------ our writers vs LeRobot
def test_lerobot_accepted_our_pickles_and_framing():
    assert REPORT["all_ok"] is True
    assert REPORT["versions"]["lerobot"] == "0.6.1"
    assert REPORT["actions"] == {"our_reader_equal": True, "decode_actions_equal": True}
    setup, obs = REPORT["policy_setup"], REPORT["timed_observation"]
    assert setup["isinstance"] and setup["equal"] and setup["same_types"] and setup["message_equal"]
    assert all(obs[k] is True for k in obs if not k.endswith("_hex")) and len(obs) == 6
    assert all(REPORT["constants"].values()) and len(REPORT["constants"]) == 5
    assert len(REPORT["framing"]) == 11 and all(case["equal"] for case in REPORT["framing"])
    server = REPORT["policy_server"]  # LeRobot's PolicyServer.SendObservations queued ours
    assert server["chunks"] > 2 and server["queued_timed_observation"] and server["queued_equal"]


def test_policy_setup_pickle_is_the_one_lerobot_accepted():
    args = ast.literal_eval(REPORT["policy_setup"]["inputs_repr"])
    ours = wire.policy_setup_pickle(*args)
    assert ours.hex() == REPORT["policy_setup"]["our_pickle_hex"]
    assert wire.decode_fields(wire.encode_policy_setup(ours), LIMIT) == {1: ours}
    loaded = _StandInUnpickler(ours).load()
    assert isinstance(loaded, RemotePolicyConfig)
    assert loaded == RemotePolicyConfig(*args)
    assert list(vars(loaded)) == list(wire.SETUP_FIELDS)


def recorded_observation() -> dict:
    image = (np.arange(np.prod(IMAGE_SHAPE)) % 251).astype(np.uint8).reshape(IMAGE_SHAPE)
    obs = {f"{m}.pos": 10.5 * i - 20.25 for i, m in enumerate(MOTORS)}
    return obs | {"front": image, "task": "pick up the red cube"}


def test_timed_observation_pickle_is_the_one_lerobot_accepted():
    obs = recorded_observation()
    ours = wire.timed_observation_pickle(T0, STEP0, obs, must_go=True)
    assert ours.hex() == REPORT["timed_observation"]["our_pickle_hex"]
    loaded = _StandInUnpickler(ours).load()
    assert isinstance(loaded, TimedObservation)
    assert (loaded.timestamp, loaded.timestep, loaded.must_go) == (T0, STEP0, True)
    np.testing.assert_array_equal(loaded.observation.pop("front"), obs.pop("front"))
    assert loaded.observation == obs
    ops = [op.name for op, _, _ in pickletools.genops(ours)]
    assert ops[:5] == ["PROTO", "GLOBAL", "EMPTY_TUPLE", "NEWOBJ", "EMPTY_DICT"]
    assert ops[-2:] == ["BUILD", "STOP"]


def test_chunk_framing_matches_lerobots_recorded_messages():
    for case in REPORT["framing"]:
        size, chunk = case["size"], case["chunk_size"]
        payload = _framing_payload(size)
        messages = wire.encode_observation_chunks(payload, chunk or wire.CHUNK_SIZE)
        fields = [wire.decode_fields(m, 3 * wire.CHUNK_SIZE) for m in messages]
        assert [f[1] for f in fields] == case["states"], case
        assert b"".join(f[2] for f in fields) == payload
        if case["lerobot_sha256"]:
            assert hashlib.sha256(b"".join(messages)).hexdigest() == case["lerobot_sha256"]


def test_writers_refuse_what_lerobot_cannot_take():
    features = {"observation.state": {"dtype": "float32", "shape": (6,), "names": ["a"] * 6}}
    cases = [
        (lambda: wire.policy_setup_pickle("gpt", "p", features, 10), "LeRobot serves act"),
        (lambda: wire.policy_setup_pickle("act", "", features, 10), "non-empty str"),
        (lambda: wire.policy_setup_pickle("act", "p", features, 0), "positive int"),
        (lambda: wire.policy_setup_pickle("act", "p", {"x": {"s": {1}}}, 1), "is set"),
        (lambda: wire.policy_setup_pickle("act", "p", features, 1, "cpu", {"a": 1}), "str to"),
        (lambda: wire.timed_observation_pickle(float("nan"), 0, {}), "finite number"),
        (lambda: wire.timed_observation_pickle(1.0, -1, {}), "an int >= 0 and a bool"),
        (lambda: wire.timed_observation_pickle(1.0, 0, {"a.pos": float("inf")}), "is float"),
        (lambda: wire.timed_observation_pickle(1.0, 0, {"x": np.full(2, np.nan)}), "NaN"),
        (lambda: wire.timed_observation_pickle(1.0, 0, {1: 1.0}), "keys must be str"),
        (lambda: wire.timed_observation_pickle(1.0, 0, {"x": object()}), "is object"),
        (lambda: wire.encode_observation_chunks(b""), "empty observation payload"),
        (lambda: wire.encode_observation_chunks(b"x", 0), "positive int"),
    ]
    for call, why in cases:
        with pytest.raises(PolicyBackendError, match=why):
            call()


# ------------------------------------------------------------------ helpers
class _StandInUnpickler(pickle.Unpickler):
    """Loads our trusted writer output, mapping LeRobot's classes to the copies above."""

    def __init__(self, data: bytes) -> None:
        import io

        super().__init__(io.BytesIO(data))

    def find_class(self, module: str, name: str):
        if module == wire.HELPERS:
            return {"RemotePolicyConfig": RemotePolicyConfig, "TimedObservation": TimedObservation}[
                name
            ]
        return super().find_class(module, name)


def _framing_payload(size: int) -> bytes:
    """record_async.py's framing payload (its big cases were random: compare their framing)."""
    return bytes((i * 7 + 3) % 256 for i in range(size)) if size < 4096 else os.urandom(size)
