"""Node entry points hear Ctrl-C and SIGTERM even when started from a parent that ignored or
blocked them (a shell without job control starts background commands with SIGINT ignored)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from ros_support import ros_env

pytest.importorskip("rclpy")

from lang2policy.ros.entry import accept_stop_signals

pytestmark = pytest.mark.ros

DOMAIN_ID = 1 + (os.getpid() + 197) % 200


def test_ignored_and_blocked_stop_signals_are_restored():
    saved = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        accept_stop_signals()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
        assert signal.SIGTERM not in signal.pthread_sigmask(signal.SIG_BLOCK, [])
    finally:
        signal.signal(signal.SIGINT, saved[0])
        signal.signal(signal.SIGTERM, saved[1])


def _ignore_sigint() -> None:  # what `command &` in a non-interactive shell does
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_a_node_started_with_sigint_ignored_still_stops_on_ctrl_c():
    env = dict(os.environ, MUJOCO_GL="egl") | ros_env(DOMAIN_ID)
    command = [sys.executable, "-m", "lang2policy.ros.safety_node"]
    node = subprocess.Popen(
        command, env=env, preexec_fn=_ignore_sigint, stderr=subprocess.PIPE, text=True
    )
    try:
        assert "[lang2policy_safety]" in node.stderr.readline()  # up: its first log line
        time.sleep(0.5)
        node.send_signal(signal.SIGINT)
        assert node.wait(timeout=30) == 0
    finally:
        if node.poll() is None:
            node.kill()
