"""Live checks against LeRobot's own code (issue 35), in LeRobot's environment (``.venv-lerobot``,
Python 3.12, LeRobot 0.6.1: ``scripts/lerobot_env.sh``). Skipped when it is not installed, as
in CI; ``bash scripts/lerobot_check.sh`` builds it and runs these before each release.

- LeRobot's ``LeRobotDataset`` loads what ``record demos`` and ``dataset from-mcap`` write, and
  an ACT trained on it by ``lerobot-train`` takes no simulator-only input;
- LeRobot's writer makes a dataset our reader turns into the simulator's own radians;
- LeRobot's real policy server, serving that ACT, answers our ``lerobot://`` backend, and drives
  the simulated arm through our VLA node and the safety node;
- ``record_async.py`` re-checks the wire codec against LeRobot's classes and server.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
LEROBOT_ENV = Path(os.environ.get("LANG2POLICY_LEROBOT_ENV", ROOT / ".venv-lerobot"))
LEROBOT_PYTHON = LEROBOT_ENV / "bin" / "python"
FIXTURES = ROOT / "test" / "fixtures" / "lerobot"
PICK_PLACE = "put the red block in the blue bowl"  # the skill the graph test starts

pytestmark = [
    pytest.mark.lerobot_live,
    pytest.mark.slow,
    pytest.mark.timeout(900),
    pytest.mark.skipif(
        not LEROBOT_PYTHON.is_file(),
        reason="no LeRobot environment (bash scripts/lerobot_env.sh, or scripts/lerobot_check.sh)",
    ),
]
OFFLINE = {**os.environ, "HF_HUB_OFFLINE": "1", "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}


def lerobot(code: str, *args: str) -> str:
    """Run ``code`` in LeRobot's environment; its stdout."""
    done = subprocess.run(
        [str(LEROBOT_PYTHON), "-c", code, *args],
        env=OFFLINE,
        text=True,
        capture_output=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


LOAD = """
import json, sys
from lerobot.datasets.lerobot_dataset import LeRobotDataset
from lerobot.utils.feature_utils import dataset_to_policy_features
ds = LeRobotDataset("local/ours", root=sys.argv[1])
item = ds[len(ds) - 1]
print(json.dumps({"frames": len(ds), "episodes": ds.meta.total_episodes, "fps": ds.fps,
                  "keys": sorted(item), "policy_inputs": sorted(dataset_to_policy_features(
                      ds.meta.features))}))
"""


@pytest.fixture(scope="module")
def demos(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("demos") / "lift"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "lang2policy.cli",
            "record",
            "demos",
            "--task-family",
            "lift",
            "--episodes",
            "2",
            "--out",
            str(out),
            "--workers",
            "0",
        ],
        env=OFFLINE,
        check=True,
        capture_output=True,
        timeout=600,
    )
    return out


@pytest.fixture(scope="module")
def act_checkpoint(demos, tmp_path_factory) -> Path:
    """An ACT trained for 2 steps by ``lerobot-train`` on ``record demos``' output."""
    out = tmp_path_factory.mktemp("act") / "run"
    train = LEROBOT_PYTHON.parent / "lerobot-train"
    options = [
        "--policy.type=act",
        "--policy.device=cpu",
        "--policy.push_to_hub=false",
        "--policy.pretrained_backbone_weights=null",
        "--policy.chunk_size=10",
        "--policy.n_action_steps=10",
        "--policy.dim_model=64",
        "--policy.use_vae=false",
        "--policy.n_encoder_layers=1",
        "--policy.n_decoder_layers=1",
        "--steps=2",
        "--batch_size=2",
        "--save_freq=2",
        "--num_workers=0",
        "--wandb.enable=false",
    ]
    done = subprocess.run(
        [
            str(train),
            "--dataset.repo_id=local/demos",
            f"--dataset.root={demos}",
            *options,
            f"--output_dir={out}",
        ],
        env=OFFLINE,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out / "checkpoints" / "last" / "pretrained_model"


def test_lerobot_loads_record_demos_and_act_takes_no_simulator_input(demos, act_checkpoint):
    seen = json.loads(lerobot(LOAD, str(demos)))
    assert seen["episodes"] == 2 and seen["fps"] == 10
    assert "observation.images.front" in seen["keys"] and "sim.environment_state" in seen["keys"]
    assert not any(name.startswith("sim.") for name in seen["policy_inputs"])
    config = json.loads((act_checkpoint / "config.json").read_text())
    assert set(config["input_features"]) == {
        "observation.state",
        "observation.images.front",
        "observation.images.wrist",
    }


def test_lerobot_loads_dataset_from_mcap(tmp_path):
    from support.mcap_story import record_episode

    from lang2policy.commands import dataset as dataset_command

    recording = record_episode(tmp_path / "recordings")
    parser = argparse.ArgumentParser()
    dataset_command.add_parser(parser.add_subparsers(dest="command"))
    out = tmp_path / "from_mcap"
    dataset_command.run(
        parser.parse_args(["dataset", "from-mcap", str(recording.parent), "--out", str(out)])
    )
    seen = json.loads(lerobot(LOAD, str(out)))
    assert seen["episodes"] == 1 and seen["frames"] > 5


def test_lerobots_writer_makes_a_dataset_we_read_in_our_units(tmp_path):
    from lang2policy.vla.dataset.combine import ForeignData, load_datasets

    frames, out = tmp_path / "frames.npz", tmp_path / "written"
    script = ROOT / "scripts" / "lerobot_fixtures"
    subprocess.run(
        [
            sys.executable,
            str(script / "render_arm_frames.py"),
            "--out",
            str(frames),
            "--episodes",
            "2",
            "--frames",
            "20",
        ],
        env=OFFLINE,
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [str(LEROBOT_PYTHON), str(script / "write_dataset.py"), str(frames), str(out)],
        env=OFFLINE,
        check=True,
        capture_output=True,
    )
    calibration = FIXTURES / "so101_follower.json"
    data = load_datasets([out], ["front"], foreign=ForeignData(calibration=calibration))
    truth = np.load(frames)
    np.testing.assert_allclose(data.state, truth["state_rad"], atol=1e-5)
    assert data.fps == 30 and data.images["front"].shape == (40, 96, 96, 3)


def test_lerobots_policy_server_answers_our_backend(act_checkpoint, tmp_path):
    from lang2policy.vla.backends.select import LeRobotOptions, open_backend

    with PolicyServer(tmp_path) as port:
        options = LeRobotOptions(checkpoint=str(act_checkpoint))
        backend = open_backend(f"lerobot://127.0.0.1:{port}", lerobot=options)
        images = {camera: np.full((128, 128, 3), 80, np.uint8) for camera in ("front", "wrist")}
        state = np.array([0.0, -0.5, 0.5, 0.3, 0.0, 0.5], np.float32)
        chunk = backend.act_chunk(images, state, "lift the red block")
        assert chunk.shape == (10, 6) and np.isfinite(chunk).all()
        again = backend.act_chunk(images, state, "lift the red block")
        np.testing.assert_allclose(again, chunk, atol=1e-5)  # one policy, the same input
        backend.close()


def test_the_wire_codec_still_matches_lerobots_code(tmp_path):
    script = ROOT / "scripts" / "lerobot_fixtures" / "record_async.py"
    done = subprocess.run(
        [str(LEROBOT_PYTHON), str(script)],
        capture_output=True,
        text=True,
        env={**OFFLINE, "LEROBOT_FIXTURES_OUT": str(tmp_path)},
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert json.loads((tmp_path / "cross_check.json").read_text())["all_ok"]


class PolicyServer:
    """LeRobot's own policy server on a free loopback port, as ``vla-serve`` starts it."""

    def __init__(self, folder: Path) -> None:
        from support.lerobot_server_double import free_port

        self.port, self.folder = free_port(), folder

    def __enter__(self) -> int:
        command = [
            str(LEROBOT_PYTHON),
            "-m",
            "lerobot.async_inference.policy_server",
            "--host=127.0.0.1",
            f"--port={self.port}",
            "--fps=10",
            "--inference_latency=0",
        ]
        self.process = subprocess.Popen(
            command,
            cwd=self.folder,
            env=OFFLINE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(8.0)  # LeRobot imports torch and its policies before it listens
        return self.port

    def __exit__(self, *exc) -> None:
        self.process.kill()
        self.process.wait(10)


@pytest.mark.ros
def test_lerobots_policy_server_moves_the_simulated_arm_through_our_graph(act_checkpoint, tmp_path):
    pytest.importorskip("rclpy")
    from support.vla_ros import skill_started, vla_graph

    domain = 1 + (os.getpid() + 173) % 200
    with PolicyServer(tmp_path) as port, pytest.MonkeyPatch.context() as mp:
        arguments = [
            "-p",
            f"backend:=lerobot://127.0.0.1:{port}",
            "-p",
            f"lerobot_checkpoint:={act_checkpoint}",
            "-p",
            "max_seconds:=20.0",
        ]
        with vla_graph(mp, domain, arguments) as (_, _, probe):
            start = probe.latest_position()
            _, commands = probe.mark()
            running = _started_with(probe, lambda probe: skill_started(probe, PICK_PLACE))
            assert running["backend"] == f"lerobot://127.0.0.1:{port}"
            wait_for_commands = 30
            deadline = time.monotonic() + 60.0
            while len(probe.commands_since(commands)) < wait_for_commands:
                assert time.monotonic() < deadline, probe.last()
                time.sleep(0.2)
            moved = np.abs(probe.latest_position() - start).max()
            print(f"\nLeRobot's ACT moved the simulated arm up to {moved:.3f} rad")
            assert moved > 0.005


def _started_with(probe, started) -> dict:
    deadline = time.monotonic() + 60.0
    while time.monotonic() < deadline:
        line = started(probe)
        if line:
            return line
    raise AssertionError(f"the skill did not start: {probe.last()}")
