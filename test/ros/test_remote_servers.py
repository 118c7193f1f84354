"""Model servers on another host, addressed by URL, that disappear (each server in a process
group of its own: another host's stand-in).

* The VLA policy on ``vla-serve --checkpoint`` (our shipped model over openpi's protocol),
  killed mid-skill: the arm holds and the VLA status names the server that is gone. Real sim,
  safety and VLA nodes, each in its own process; judged by the arm.
* The planner's LLM on an OpenAI-compatible server (the real local llama.cpp server, asked as
  ``llm:=openai`` at ``OPENAI_BASE_URL``): the ``ready`` line says the server answers; once it
  is gone, an instruction fails with a status that names the unreachable URL.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")

from support.ddp import free_port  # noqa: E402
from support.ros import spinning  # noqa: E402
from support.vla_ros import skill_started, vla_graph  # noqa: E402
from support.waiting import wait_for  # noqa: E402

from lang2policy.errors import PolicyBackendError  # noqa: E402
from lang2policy.vla.backends.local import default_model_dir  # noqa: E402
from lang2policy.vla.backends.openpi import OpenPIBackend  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.timeout(300)]

DOMAIN_ID = 1 + (os.getpid() + 163) % 200
SKILL = "put the red block in the blue bowl"


def start_server(port: int) -> subprocess.Popen:
    """``lang2policy vla-serve --checkpoint`` in a process group of its own."""
    command = [sys.executable, "-m", "lang2policy.cli", "vla-serve",
               "--checkpoint", str(default_model_dir()), "--port", str(port)]  # fmt: skip
    server = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    client = OpenPIBackend("127.0.0.1", port)

    def healthy() -> bool:
        try:
            client.check_health()
        except PolicyBackendError:  # not up yet
            return server.poll() is not None  # a dead server ends the wait (asserted below)
        return True

    wait_for(healthy, 90.0, "the policy server's /healthz")
    assert server.poll() is None, "vla-serve exited"
    return server


def test_the_arm_holds_and_the_status_names_the_server_when_it_disappears_mid_skill():
    port = free_port()
    server = start_server(port)
    address = f"openpi://127.0.0.1:{port}"
    arguments = ["-p", f"backend:={address}", "-p", "max_seconds:=60.0"]
    try:
        with pytest.MonkeyPatch.context() as mp, vla_graph(mp, DOMAIN_ID, arguments) as graph:
            _, _, probe = graph
            start = probe.latest_position()
            running = wait_for(lambda: skill_started(probe, SKILL), 30.0, "the skill to start")
            assert running["backend"] == address
            wait_for(
                lambda: np.abs(probe.latest_position()[:5] - start[:5]).max() > 0.05,
                30.0,
                "the served policy to move the arm",
                detail=lambda: f"{probe.latest_position() - start} moved; {probe.last()}",
            )
            since, _ = probe.mark()
            os.killpg(server.pid, signal.SIGKILL)  # the host goes away, mid-skill
            server.wait(timeout=10)
            _, failed = probe.status("failed", since, timeout=20.0)
            assert address in failed["detail"], failed
            assert "policy backend error" in failed["detail"]
            drift = probe.drift_after_hold()
            print(f"\n{failed['detail']}\nthe arm drifted {drift:.4f} rad after the server went")
            assert drift < 0.005
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)


def test_the_planner_names_its_llm_server_when_it_is_gone(monkeypatch):
    from rclpy.parameter import Parameter
    from std_msgs.msg import String

    from lang2policy.graph.topics import INSTRUCTION, STATUS
    from lang2policy.llm.local_server import LocalModelServer
    from lang2policy.ros.planner_node import PlannerNode

    server = LocalModelServer(prefix_root=None).start()  # its own process group
    url = server.base_url
    for key, value in {"OPENAI_BASE_URL": url, "OPENAI_API_KEY": "local", "ROS_DOMAIN_ID":
                       str(DOMAIN_ID + 1), "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}.items():
        monkeypatch.setenv(key, value)  # fmt: skip
    context = rclpy.Context()
    rclpy.init(context=context)
    overrides = [Parameter("llm", value="openai"), Parameter("execute", value="local"),
                 Parameter("objects", value="red block,blue bowl")]  # fmt: skip
    planner = PlannerNode(context=context, parameter_overrides=overrides)
    probe = rclpy.create_node("llm_server_probe", context=context)
    lines: list[dict] = []
    probe.create_subscription(String, STATUS.name, lambda m: lines.append(json.loads(m.data)), 50)
    publisher = probe.create_publisher(String, INSTRUCTION.name, 10)

    def planner_line(state: str, instruction: str = "") -> dict | None:
        wanted = {"node": "planner", "state": state, "instruction": instruction}
        return next((x for x in lines if all(x.get(k) == v for k, v in wanted.items())), None)

    try:
        with spinning(context, [planner, probe], threads=3):
            ready = wait_for(lambda: planner_line("ready"), 120.0, "the planner's ready line")
            assert f"the LLM server at {url} answers (models:" in ready["detail"]["llm"], ready
            os.killpg(server.pid, signal.SIGKILL)  # the LLM's host goes away
            server.stop()
            instruction = "put the red block in the blue bowl"
            wait_for(lambda: publisher.get_subscription_count() > 0, 10.0, "the planner")
            publisher.publish(String(data=instruction))
            failed = wait_for(lambda: planner_line("failed", instruction), 120.0, "the failure")
            print(f"\nready: {ready['detail']['llm']}\nfailed: {failed['detail']}")
            assert f"cannot reach the LLM server at {url}" in json.dumps(failed["detail"])
            planner.wait_idle(timeout=30)
    finally:
        server.stop()
