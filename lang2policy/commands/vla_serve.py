"""``lang2policy vla-serve --lerobot CKPT``: LeRobot's own policy server for a LeRobot policy.

    lang2policy vla-serve --lerobot outputs/train/act_so101/checkpoints/last/pretrained_model

starts ``python -m lerobot.async_inference.policy_server`` in LeRobot's environment
(``.venv-lerobot``, made by ``scripts/lerobot_env.sh``; or ``--lerobot-env DIR``), on loopback,
and prints the VLA node parameters that make our graph drive the arm with that policy. The
policy runs in LeRobot's process with LeRobot's torch; ours never loads it. Its server loads
the checkpoint the client names, so the checkpoint is checked here (a LeRobot ``config.json``
with a policy type its server runs) before anything starts.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path

from lang2policy.errors import ConfigError

DEFAULT_ENV = Path(__file__).resolve().parents[2] / ".venv-lerobot"
SERVER_MODULE = "lerobot.async_inference.policy_server"


def add_parser(commands) -> None:
    """``vla-serve`` under ``commands`` (argparse subparsers)."""
    serve = commands.add_parser(
        "vla-serve", help="serve a LeRobot policy (ACT, Diffusion, SmolVLA, pi0) to the VLA node"
    )
    serve.add_argument("--lerobot", type=Path, required=True, metavar="CKPT",
                       help="the policy's pretrained_model directory (lerobot-train's output)")
    serve.add_argument("--host", default="127.0.0.1", help="listen address (loopback)")
    serve.add_argument("--port", type=int, default=8080, help="gRPC port (LeRobot's default)")
    serve.add_argument("--fps", type=int, default=None,
                       help="the policy's control rate (default: its dataset's, else 30)")
    serve.add_argument("--lerobot-env", type=Path, default=None, metavar="DIR",
                       help=f"LeRobot's virtual environment (default {DEFAULT_ENV.name}; "
                       "$LANG2POLICY_LEROBOT_ENV)")
    serve.add_argument("--allow-remote", action="store_true",
                       help="listen on a non-loopback address (its protocol unpickles requests)")
    serve.add_argument("--dry-run", action="store_true", help="check, print; start nothing")


def server_command(args: argparse.Namespace) -> list[str]:
    """The command that starts LeRobot's server, after checking what it will be asked."""
    from lang2policy.vla.backends.lerobot_policy import LeRobotPolicySpec
    from lang2policy.vla.backends.lerobot_server import is_loopback

    if not args.allow_remote and not is_loopback(args.host):
        raise ConfigError(
            f"--host {args.host}: LeRobot's policy server unpickles what clients send; it "
            "listens on loopback unless --allow-remote (better: an SSH tunnel)"
        )
    if not 1 <= args.port <= 65535 or not 1 <= (args.fps or 30) <= 1000:
        raise ConfigError("--port must be 1..65535 and --fps 1..1000")
    spec = LeRobotPolicySpec.from_checkpoint(args.lerobot)  # its type is one LeRobot serves
    args.fps = args.fps or spec.fps or 30
    environment = args.lerobot_env or Path(os.environ.get("LANG2POLICY_LEROBOT_ENV", DEFAULT_ENV))
    python = environment / "bin" / "python"
    if not python.is_file():
        raise ConfigError(
            f"LeRobot's environment is not at {environment}: create it once with "
            "`bash scripts/lerobot_env.sh` (Python 3.12, LeRobot 0.6.1), or pass --lerobot-env"
        )
    return [str(python), "-m", SERVER_MODULE, f"--host={args.host}", f"--port={args.port}",
            f"--fps={args.fps}", "--inference_latency=0"]  # fmt: skip


def node_parameters(args: argparse.Namespace) -> str:
    """The VLA node's parameters for this server and checkpoint."""
    host = f"[{args.host}]" if ":" in args.host else args.host
    checkpoint = Path(args.lerobot).resolve()
    return (
        f"-p backend:=lerobot://{host}:{args.port} -p lerobot_checkpoint:={checkpoint} "
        f"-p rate:={args.fps}"
    )


def sim_command(args: argparse.Namespace) -> str:
    """``lang2policy sim`` with the VLA node on this server and checkpoint."""
    host = f"[{args.host}]" if ":" in args.host else args.host
    return (
        f"lang2policy sim --vla --vla-backend lerobot://{host}:{args.port} "
        f"--vla-lerobot-checkpoint {Path(args.lerobot).resolve()}"
    )


def run(args: argparse.Namespace) -> int:
    command = server_command(args)
    print(f"LeRobot policy server: {shlex.join(command)}")
    print(f"VLA node parameters:  {node_parameters(args)}")
    print(f"or the whole graph:   {sim_command(args)}")
    print("  (add -p lerobot_calibration:=ARM.json if the policy was trained on a LeRobot "
          "recording: its units are LeRobot's)")  # fmt: skip
    if args.dry_run:
        return 0
    logs = Path("out") / "lerobot-server"
    logs.mkdir(parents=True, exist_ok=True)  # LeRobot writes logs/ under its working dir
    environment = {**os.environ, "HF_HUB_OFFLINE": "1"}
    try:
        return subprocess.run(command, cwd=logs, env=environment, check=False).returncode
    except KeyboardInterrupt:
        print("vla-serve: stopped", file=sys.stderr)
        return 130
