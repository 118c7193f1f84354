"""Node entry points hear Ctrl-C and SIGTERM even when started from a parent that ignored or
blocked them (a shell without job control starts background commands with SIGINT ignored)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from support.ros import ros_env

pytest.importorskip("rclpy")

from lang2policy.errors import ConfigError
from lang2policy.ros.entry import EXECUTOR, accept_stop_signals, make_executor

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


def test_the_executor_is_chosen_by_the_environment(monkeypatch):
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    context = rclpy.Context()
    rclpy.init(context=context, domain_id=DOMAIN_ID)
    try:
        monkeypatch.setenv(EXECUTOR, "single")
        single = make_executor(context)
        assert isinstance(single, SingleThreadedExecutor)
        single.shutdown()
        monkeypatch.setenv(EXECUTOR, "threads")
        with pytest.raises(ConfigError, match="'events' or 'single'"):
            make_executor(context)
    finally:
        rclpy.shutdown(context=context)


@pytest.mark.parametrize("executor", ["events", "single"])
def test_a_node_stops_on_sigterm_with_exit_code_0(executor):
    env = dict(os.environ, MUJOCO_GL="egl", **{EXECUTOR: executor}) | ros_env(DOMAIN_ID)
    command = [sys.executable, "-m", "lang2policy.ros.safety_node"]
    node = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert "[lang2policy_safety]" in node.stderr.readline()  # up: its first log line
        node.send_signal(signal.SIGTERM)
        assert node.wait(timeout=30) == 0
    finally:
        if node.poll() is None:
            node.kill()
