"""``lang2policy vla-serve``: a policy server the VLA node reaches by URL.

    lang2policy vla-serve --checkpoint models/vla-so101-tiny      # our own model, openpi protocol
    lang2policy vla-serve --lerobot outputs/train/act_so101/checkpoints/last/pretrained_model

``--checkpoint DIR`` serves one of our own VLA checkpoints over openpi's websocket protocol
(``vla.backends.openpi_server``) in this process: the graph then drives the arm with
``backend:=openpi://HOST:PORT``, the policy's torch running wherever the server runs (another
host, a GPU). ``--lerobot CKPT``
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
    served = serve.add_mutually_exclusive_group(required=True)
    served.add_argument("--checkpoint", type=Path, metavar="DIR",
                        help="one of our VLA model directories, served over openpi's protocol")
    served.add_argument("--lerobot", type=Path, metavar="CKPT",
                        help="the policy's pretrained_model directory (lerobot-train's output)")
    serve.add_argument("--host", default="127.0.0.1", help="listen address (loopback)")
    serve.add_argument("--port", type=int, default=None,
                       help="port (default: 8000 for --checkpoint, openpi's; 8080 for "
                       "--lerobot, LeRobot's gRPC default)")
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
    args.port = 8080 if getattr(args, "port", None) is None else args.port
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
    if getattr(args, "checkpoint", None) is not None:
        return serve_checkpoint(args)
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


def serve_checkpoint(args: argparse.Namespace) -> int:
    """Serve our own checkpoint over openpi's protocol until interrupted."""
    from lang2policy.vla.backends.local import LocalBackend
    from lang2policy.vla.backends.openpi_server import PolicyServer, ServedModel

    args.port = 8000 if args.port is None else args.port
    if not 0 <= args.port <= 65535:
        raise ConfigError(f"--port must be 0..65535, got {args.port}")
    backend = LocalBackend.load(args.checkpoint, threads=None)
    model = ServedModel(backend, backend.image_size, Path(args.checkpoint).resolve().name)
    backend.policy.warm_up()  # before it listens: the encoder's load outlasts a 2 s request
    if args.dry_run:
        print(f"would serve {model.name} ({backend.image_size} px, cameras "
              f"{list(backend.cameras)}) on {args.host}:{args.port}")  # fmt: skip
        return 0
    server = PolicyServer(model, args.host, args.port, allow_remote=args.allow_remote)
    host = f"[{args.host}]" if ":" in args.host else args.host
    print(f"serving {model.name} over openpi's protocol on ws://{host}:{server.port} "
          f"(GET /healthz); one client at a time")  # fmt: skip
    print(f"VLA node parameters:  -p backend:=openpi://{host}:{server.port}")
    print(f"or the whole graph:   lang2policy sim --vla --vla-backend openpi://{host}:{server.port}")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("vla-serve: stopped", file=sys.stderr)
        return 130
    return 0
