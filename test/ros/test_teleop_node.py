"""The teleop node keeps running when its source fails in a way the driver does not expect: any
exception from reading the leader is a fault, as a bus error is. The arm is told to hold once,
the status says why, the traceback is logged once, and the next good reading streams again.
The node runs in this process (rclpy) with a stand-in leader; its publishers are recorded."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

import numpy as np
import pytest
import rclpy

os.environ.setdefault("MUJOCO_GL", "egl")

from lang2policy.ros import teleop_node
from lang2policy.teleop.stream import HOLDING, STREAMING

pytestmark = pytest.mark.ros


class _Keys:
    """No terminal in a test: no keys."""

    def start(self) -> None: ...

    def pressed(self) -> list[str]:
        return []

    def show(self, text: str) -> None: ...

    def stop(self) -> None: ...


class _Leader:
    """Fails with ``error`` while it is set, else reads ``target``."""

    def __init__(self, target) -> None:
        self.target, self.error = target, None

    def read(self):
        if self.error is not None:
            raise self.error
        return SimpleNamespace(target=self.target)

    def close(self) -> None: ...


def test_an_unexpected_source_error_holds_once_says_why_and_the_node_lives(monkeypatch):
    monkeypatch.setattr(teleop_node, "KeyReader", _Keys)
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=int(os.environ.get("ROS_DOMAIN_ID", "0")))
    try:
        node = teleop_node.TeleopNode(context=context)
        commands, statuses = [], []
        node._command.publish = commands.append
        node._status.publish = lambda msg: statuses.append(json.loads(msg.data))
        leader = _Leader(np.zeros(len(node.names)))
        node.leader, node.keyboard = leader, None
        node._tick()
        assert node.stream.step(node.now()).state == STREAMING
        leader.error = RuntimeError("the USB adapter vanished")
        before = len(commands)
        for _ in range(5):
            node._tick()  # before: the RuntimeError went up through the timer: node gone
        holds = [c for c in commands[before:] if not c.points]
        assert len(holds) == 1 and len(commands) == before + 1  # one hold, nothing else
        said = statuses[-1]
        assert said["state"] == HOLDING, said
        assert "RuntimeError: the USB adapter vanished" in said["detail"], said
        leader.error = None
        node._tick()
        assert commands[-1].points and statuses[-1]["state"] == STREAMING  # streams again
        node.destroy_node()
    finally:
        rclpy.shutdown(context=context)
