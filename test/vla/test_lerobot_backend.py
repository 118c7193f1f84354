"""The ``lerobot://`` backend (issue 35) against a gRPC stand-in for LeRobot's policy server
(``lerobot_server_double.py``, its own process) and LeRobot's real recorded answers; the live
check against LeRobot's own server is ``vla/test_lerobot_live.py`` (needs ``.venv-lerobot``)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest
from support.lerobot_server_double import DoubleProcess
from support.waiting import wait_for

from lang2policy.commands import vla_serve
from lang2policy.errors import ConfigError, PolicyBackendError
from lang2policy.robots.so101.lerobot_calibration import (
    action_to_lerobot,
    from_lerobot,
    read_lerobot_calibration,
)
from lang2policy.vla.backends import RemoteLimits
from lang2policy.vla.backends.select import LeRobotOptions, open_backend, parse_backend

pytestmark = pytest.mark.timeout(120)

HERE = Path(__file__).parents[1]  # test/
ASYNC = HERE / "fixtures" / "lerobot_async"
CHECKPOINT = ASYNC / "act_checkpoint"
CALIBRATION = HERE / "fixtures" / "lerobot" / "so101_follower.json"
STATE = np.array([0.1, -0.4, 0.5, 0.3, 0.0, 0.8], np.float32)
TARGET = [0.3, -0.2, 0.4, 0.5, 0.1, 0.2]
INSTRUCTION = "put the red block in the blue bowl"


@pytest.fixture
def server(tmp_path):
    running = DoubleProcess(tmp_path, f"follow {json.dumps(TARGET)}")
    yield running
    running.stop()


def backend(server: DoubleProcess, **options):
    chosen = LeRobotOptions(checkpoint=str(CHECKPOINT), **options)
    return open_backend(f"lerobot://127.0.0.1:{server.port}", lerobot=chosen,
                        limits=RemoteLimits(connect_s=10.0, request_s=5.0))  # fmt: skip


def images(size: int = 96) -> dict[str, np.ndarray]:
    return {c: np.full((size, size + 32, 3), 90, np.uint8) for c in ("front", "wrist")}


def test_the_policy_is_set_up_from_its_checkpoint_and_a_chunk_comes_back_in_our_units(server):
    policy = backend(server)
    assert policy.name == f"lerobot://127.0.0.1:{server.port}"
    assert policy.cameras == ("front", "wrist")  # from the checkpoint's input features
    chunk = policy.act_chunk(images(), STATE, INSTRUCTION)
    assert chunk.shape == (10, 6) and chunk.dtype == np.float32
    np.testing.assert_allclose(chunk[-1], TARGET, atol=1e-6)
    np.testing.assert_allclose(chunk[0], STATE + (np.array(TARGET) - STATE) / 10, atol=1e-6)
    (setup,) = server.requests("SendPolicyInstructions")
    assert setup["policy_type"] == "act"
    assert setup["pretrained_name_or_path"] == str(CHECKPOINT.resolve())
    features = setup["lerobot_features"]
    assert features["observation.state"]["names"][0] == "shoulder_pan"
    assert features["observation.images.front"]["shape"] == [96, 128, 3]
    (sent,) = server.requests("SendObservations")
    assert sent["must_go"] and sent["timestep"] == 0 and sent["values"]["task"] == INSTRUCTION
    assert sent["values"]["shoulder_lift"] == pytest.approx(-0.4)
    policy.act_chunk(images(), STATE, INSTRUCTION)
    assert server.requests("SendObservations")[-1]["timestep"] == 1
    assert len(server.requests("SendPolicyInstructions")) == 1  # loaded once
    policy.close()


def test_a_policy_in_lerobots_units_is_sent_degrees_and_its_degrees_come_back_as_radians(server):
    motors = read_lerobot_calibration(CALIBRATION)
    ours = from_lerobot(motors, accept_calibration_pose=True)
    target = action_to_lerobot(motors, ours, TARGET)
    server.mode(f"follow {json.dumps(list(target.values()))}")
    policy = backend(server, calibration=str(CALIBRATION))
    chunk = policy.act_chunk(images(), STATE, INSTRUCTION)
    np.testing.assert_allclose(chunk[-1], TARGET, atol=1e-4)
    (sent,) = server.requests("SendObservations")
    degrees = action_to_lerobot(motors, ours, STATE.tolist())
    assert sent["values"]["elbow_flex.pos"] == pytest.approx(degrees["elbow_flex"], abs=1e-4)
    names = server.requests("SendPolicyInstructions")[0]["lerobot_features"]["observation.state"]
    assert names["names"][-1] == "gripper.pos"


@pytest.mark.parametrize(
    ("mode", "match"),
    [
        ("nan", "NaN"),
        ("wrong_dim", "shape"),
        (f"file {ASYNC / 'hostile_os_system.pkl'}", "posix system|not allowed|allowed"),
        (f"file {ASYNC / 'hostile_huge_tensor.pkl'}", "allowed"),
        ("empty", "no action chunk"),
        ("slow 8", "took over"),
    ],
)
def test_hostile_or_failed_answers_are_refused_and_the_next_request_reconnects(
    server, mode, match
):
    policy = backend(server)
    policy.act_chunk(images(), STATE, INSTRUCTION)
    server.mode(mode)
    with pytest.raises(PolicyBackendError, match=match):
        policy.act_chunk(images(), STATE, INSTRUCTION)
    server.mode(f"follow {json.dumps(TARGET)}")
    wait_for(lambda: _answers(policy), 30.0, "a good answer after the failure")
    assert len(server.requests("SendPolicyInstructions")) == 2  # set up again on the new link


def _answers(policy) -> bool:
    try:
        return policy.act_chunk(images(), STATE, INSTRUCTION).shape == (10, 6)
    except PolicyBackendError:
        return False


def test_lerobots_recorded_answer_is_read_as_its_rows():
    from lang2policy.vla.backends.lerobot_policy import LeRobotPolicySpec
    from lang2policy.vla.backends.lerobot_server import LeRobotBackend

    recorded = json.loads((ASYNC / "actions_10x6.json").read_text())
    policy = LeRobotBackend("127.0.0.1", 1, LeRobotPolicySpec.from_checkpoint(CHECKPOINT))
    policy._timestep = recorded["timesteps"][0]
    rows = policy._read((ASYNC / "actions_10x6.pb").read_bytes())
    np.testing.assert_allclose(rows, np.array(recorded["actions"], np.float32))
    policy._timestep += 1
    with pytest.raises(PolicyBackendError, match="another request"):
        policy._read((ASYNC / "actions_10x6.pb").read_bytes())


def test_only_loopback_unless_allowed_and_a_checkpoint_is_required(tmp_path):
    assert parse_backend("lerobot://127.0.0.1:8080").kind == "lerobot"
    options = LeRobotOptions(checkpoint=str(CHECKPOINT))
    with pytest.raises(ConfigError, match="loopback only"):
        open_backend("lerobot://10.1.2.3:8080", lerobot=options)
    allowed = LeRobotOptions(checkpoint=str(CHECKPOINT), allow_remote=True)
    assert open_backend("lerobot://10.1.2.3:8080", lerobot=allowed).cameras == ("front", "wrist")
    with pytest.raises(ConfigError, match="needs the policy's checkpoint"):
        open_backend("lerobot://127.0.0.1:8080")
    with pytest.raises(ConfigError, match=r"no config\.json"):
        open_backend("lerobot://127.0.0.1:8080", lerobot=LeRobotOptions(checkpoint=str(tmp_path)))
    (tmp_path / "config.json").write_text(json.dumps({"type": "my_policy"}))
    with pytest.raises(ConfigError, match="not one its server runs"):
        open_backend("lerobot://127.0.0.1:8080", lerobot=LeRobotOptions(checkpoint=str(tmp_path)))


def test_vla_serve_checks_the_checkpoint_and_the_environment(tmp_path, capsys):
    args = argparse.Namespace(lerobot=CHECKPOINT, host="127.0.0.1", port=8080, fps=None,
                              lerobot_env=tmp_path, allow_remote=False, dry_run=True)  # fmt: skip
    with pytest.raises(ConfigError, match=r"scripts/lerobot_env\.sh"):
        vla_serve.run(args)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").write_text("")
    assert vla_serve.run(args) == 0
    out = capsys.readouterr().out
    assert "lerobot.async_inference.policy_server --host=127.0.0.1 --port=8080" in out
    assert f"backend:=lerobot://127.0.0.1:8080 -p lerobot_checkpoint:={CHECKPOINT.resolve()}" in out
    with pytest.raises(ConfigError, match="loopback"):
        vla_serve.run(argparse.Namespace(**{**vars(args), "host": "0.0.0.0"}))


def test_the_policys_rate_comes_from_its_training_dataset_when_this_machine_has_it(tmp_path):
    from lang2policy.vla.backends.lerobot_policy import LeRobotPolicySpec

    assert LeRobotPolicySpec.from_checkpoint(CHECKPOINT).fps is None  # no train_config.json
    checkpoint = tmp_path / "pretrained_model"
    checkpoint.mkdir()
    (checkpoint / "config.json").write_text((CHECKPOINT / "config.json").read_text())
    dataset = HERE / "fixtures" / "lerobot" / "so101_sweep"  # LeRobot's writer, 30 fps
    (checkpoint / "train_config.json").write_text(json.dumps({"dataset": {"root": str(dataset)}}))
    assert LeRobotPolicySpec.from_checkpoint(checkpoint).fps == 30
    options = LeRobotOptions(checkpoint=str(checkpoint))
    assert open_backend("lerobot://127.0.0.1:8080", lerobot=options).fps == 30
    chosen = LeRobotOptions(checkpoint=str(checkpoint), fps=15)
    assert open_backend("lerobot://127.0.0.1:8080", lerobot=chosen).fps == 15
    (checkpoint / "train_config.json").write_text(json.dumps({"dataset": {"root": "/nowhere"}}))
    assert LeRobotPolicySpec.from_checkpoint(checkpoint).fps is None


def test_the_first_answer_after_a_load_may_take_the_servers_warm_up(server):
    server.mode("slow 6")
    policy = backend(server)  # 5 s a request, but the first answer includes the warm-up
    assert policy.act_chunk(images(), STATE, INSTRUCTION).shape == (10, 6)
    with pytest.raises(PolicyBackendError, match="took over 5 s"):
        policy.act_chunk(images(), STATE, INSTRUCTION)  # warm now: 5 s is the limit
