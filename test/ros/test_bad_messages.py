"""One bad message must not end a node (issue 13, finding 5), over real rclpy and DDS.

The controller, planner and recorder nodes run as their console entries do, each in its own
process (``python -m lang2policy.ros.<node>``), on a private domain on loopback. A probe node
in this process publishes, on the topic each node decodes, the payloads that ended them: JSON
nested 100000 deep (a list, an object), a 5000-digit integer, a list where a term name or a
state belongs, text that is not JSON, a 10 MB string, an unpaired surrogate escape (which
rclpy's logger cannot print) and, to the recorder's raw subscription, bytes that are no
std_msgs/String. Then it checks by effect that each node is still alive and still answering:
the controller rejects each bad spec with its reason and takes a valid spec afterwards, the
planner still stops on a safety "stopped" line and answers an instruction, and the recorder
still writes the file of an episode that starts after the bad lines.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

os.environ.setdefault("MUJOCO_GL", "egl")

rclpy = pytest.importorskip("rclpy")

from std_msgs.msg import String  # noqa: E402
from support.ros import ros_env, spinning  # noqa: E402
from support.waiting import wait_for  # noqa: E402

from lang2policy.graph import topics  # noqa: E402

pytestmark = pytest.mark.ros

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "test" / "fixtures" / "llm" / "cap_session.jsonl"
DOMAIN_ID = 1 + (os.getpid() + 151) % 200
TEN_MB = 10 << 20
DEEP = 100_000
VALID_TERMS = [{"term": "tool_to_point", "params": {"point": [0.2, 0.0, 0.1]}}]

# (name, payload, what the controller's rejection must say)
BAD_SPECS = [
    ("deep list", "[" * DEEP + "]" * DEEP, "levels deep"),
    ("deep object", '{"a":' * DEEP + "1" + "}" * DEEP, "at most"),  # 600 kB: too deep, too big
    ("5000-digit integer", '{"terms": [], "duration": ' + "9" * 5000 + "}", "5000 characters"),
    ("list as term name", json.dumps({"terms": [{"term": ["reach"]}]}), "unknown term"),
    ("not JSON", "{not json", "not valid JSON"),
    ("10 MB string", json.dumps({"task": "x" * TEN_MB, "terms": VALID_TERMS}), "at most"),
    ("unpaired surrogate", '{"task": "\\ud800", "terms": [], "x": 1}', "surrogate"),
]
# (name, payload) for the status lines the planner (safety) and recorder (status) decode
BAD_STATUS_LINES = [
    ("deep list", "[" * DEEP + "]" * DEEP),
    ("deep object", '{"state": "ok", "detail": ' + "[" * DEEP + "]" * DEEP + "}"),
    ("5000-digit integer", '{"state": "ok", "n": ' + "9" * 5000 + "}"),
    ("list as state", json.dumps({"state": ["stopped"], "instruction": "x"})),
    ("not JSON", "{not json"),
    ("10 MB string", json.dumps({"state": "received", "instruction": "x" * TEN_MB})),
    ("unpaired surrogate", '{"state": "received", "instruction": "\\ud800"}'),
]


class NodeProcess:
    """One node's console entry in its own process; its output goes to a file for reports."""

    def __init__(self, module: str, params: list[str], log: Path, env: dict) -> None:
        command = [sys.executable, "-m", f"lang2policy.ros.{module}", "--ros-args"]
        for param in params:
            command += ["-p", param]
        self.name, self.log = module, log
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT
            )

    def alive(self) -> bool:
        return self.process.poll() is None

    def report(self) -> str:
        """Exit status and the end of the output (a traceback when the node died)."""
        tail = self.log.read_text(errors="replace")[-3000:]
        return f"{self.name}: exit code {self.process.poll()}; output ends:\n{tail}"

    def stop(self) -> None:
        if self.alive():
            self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)


class Probe:
    """Publishes on the nodes' inputs; collects every /lang2policy/status line."""

    def __init__(self, context) -> None:
        self.node = rclpy.create_node("bad_messages_probe", context=context)
        self.lock = threading.Lock()
        self.statuses: list[dict] = []
        self.node.create_subscription(String, topics.STATUS.name, self._on_status, 100)
        self.publishers = {
            topic: self.node.create_publisher(String, topic, 10)
            for topic in (
                topics.REWARD_SPEC.name,
                topics.STATUS.name,
                topics.SAFETY.name,
                topics.INSTRUCTION.name,
            )
        }

    def _on_status(self, msg: String) -> None:
        try:
            line = json.loads(msg.data)
        except (ValueError, RecursionError):  # our own bad lines on this topic
            return
        if isinstance(line, dict):
            with self.lock:
                self.statuses.append(line)

    def mark(self) -> int:
        with self.lock:
            return len(self.statuses)

    def publish(self, topic: str, payload: str | bytes) -> None:
        """A String, or raw bytes sent as if they were one serialized."""
        publisher = self.publishers[topic]
        publisher.publish(payload if isinstance(payload, bytes) else String(data=payload))

    def answer(
        self,
        since: int,
        predicate: Callable[[dict], bool],
        node: NodeProcess,
        resend: Callable[[], None] | None = None,
    ) -> dict:
        """The first status line after ``since`` that satisfies ``predicate``; fails at once
        (with the node's traceback) when the node has exited. ``resend`` (if given) is called
        every second until then: a handshake, since a message sent before the node's reader
        has matched this writer is lost (a publisher can see the subscription first)."""
        sent = [-1.0]

        def found():
            if not node.alive():
                return "died"
            if resend is not None and time.monotonic() - sent[0] > 1.0:
                sent[0] = time.monotonic()
                resend()
            with self.lock:
                return next((s for s in self.statuses[since:] if predicate(s)), None)

        try:
            result = wait_for(found, 60.0, f"an answer from {node.name}")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{node.report()}") from None
        assert result != "died", node.report()
        return result


@pytest.fixture(scope="module")
def bad_messages_graph():
    """The three nodes as processes and the probe, on a private domain."""
    env = dict(os.environ, **ros_env(DOMAIN_ID))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    with tempfile.TemporaryDirectory(prefix="bad-messages-") as folder:
        out = Path(folder)
        nodes = {
            "controller": NodeProcess(
                "controller_node", ["samples:=8", "threads:=1"], out / "controller.log", env
            ),
            "planner": NodeProcess(
                "planner_node",
                [
                    f"llm:=replay:{FIXTURE}",
                    "grounding:=off",
                    "objects:=red block,blue block,blue bowl,green bowl",
                    "seed:=1",
                    "execute:=local",
                ],
                out / "planner.log",
                env,
            ),
            "recorder": NodeProcess(
                "recorder_node",
                [f"output_dir:={out / 'recordings'}", "linger:=0.2", "preroll:=0.0"],
                out / "recorder.log",
                env,
            ),
        }
        with pytest.MonkeyPatch.context() as mp:
            for key, value in ros_env(DOMAIN_ID).items():
                mp.setenv(key, value)
            context = rclpy.Context()
            rclpy.init(context=context)
            probe = Probe(context)
            try:
                with spinning(context, [probe.node]):
                    wait_until_ready(probe, nodes, out / "recordings")
                    yield probe, nodes, out / "recordings"
            finally:
                for node in nodes.values():
                    node.stop()


def wait_until_ready(probe: Probe, nodes: dict[str, NodeProcess], recordings: Path) -> None:
    """Each node hears the probe: it has answered a message sent after it subscribed (the
    controller cancels a ``null`` spec, the planner rejects an empty instruction, the recorder
    writes a handshake episode), so no bad message below is lost to discovery."""
    controller, planner, recorder = nodes["controller"], nodes["planner"], nodes["recorder"]
    probe.answer(
        probe.mark(),
        lambda s: s.get("node") == "controller" and s["state"] == "cancelled",
        controller,
        resend=lambda: probe.publish(topics.REWARD_SPEC.name, "null"),
    )
    probe.answer(
        probe.mark(),
        lambda s: topics.status_node(s) == topics.PLANNER_NODE and s["state"] == "rejected",
        planner,
        resend=lambda: probe.publish(topics.INSTRUCTION.name, " "),
    )
    record_episode(probe, recorder, recordings, "Handshake")


def record_episode(probe: Probe, recorder: NodeProcess, recordings: Path, label: str) -> Path:
    """Publish an episode's status lines (again each second) until its file is written."""
    sent = [-1.0]

    def written():
        assert recorder.alive(), recorder.report()
        if time.monotonic() - sent[0] > 1.0:
            sent[0] = time.monotonic()
            for state in ("received", "done"):
                line = {"state": state, "instruction": label, "detail": ""}
                probe.publish(topics.STATUS.name, json.dumps(line))
        return sorted(recordings.glob(f"*_{label.lower().replace(' ', '-')}.mcap"))

    try:
        files = wait_for(written, 60.0, f"the recording of the episode {label!r}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{recorder.report()}") from None
    return files[0]


def test_the_controller_rejects_each_bad_spec_and_still_takes_a_good_one(bad_messages_graph):
    probe, nodes, _ = bad_messages_graph
    controller = nodes["controller"]
    for name, payload, reason in BAD_SPECS:
        since = probe.mark()
        probe.publish(topics.REWARD_SPEC.name, payload)
        answer = probe.answer(since, _spec_answer, controller)
        assert answer["state"] == "rejected", (name, answer)
        assert reason in answer["detail"], (name, answer["detail"][:300])
        assert len(json.dumps(answer)) < 10_000, name  # the reason, not the payload
    since = probe.mark()
    probe.publish(
        topics.REWARD_SPEC.name, json.dumps({"task": "after the bad ones", "terms": VALID_TERMS})
    )
    answer = probe.answer(since, _spec_answer, controller)
    assert (answer["state"], answer["task"]) == ("accepted", "after the bad ones"), answer
    since = probe.mark()  # and it keeps reporting
    probe.answer(since, lambda s: s.get("node") == "controller" and "stats" in s, controller)
    assert controller.alive(), controller.report()


def _spec_answer(status: dict) -> bool:
    return status.get("node") == "controller" and status["state"] in ("accepted", "rejected")


def test_the_planner_drops_bad_safety_lines_and_still_stops_and_answers(bad_messages_graph):
    probe, nodes, _ = bad_messages_graph
    planner = nodes["planner"]
    for _name, payload in BAD_STATUS_LINES:
        probe.publish(topics.SAFETY.name, payload)
    since = probe.mark()
    stop = {"node": "safety", "state": "stopped", "reason": "stop requested"}
    probe.publish(topics.SAFETY.name, json.dumps(stop))
    stopped = probe.answer(
        since,
        lambda s: topics.status_node(s) == topics.PLANNER_NODE and s["state"] == "stopped",
        planner,
    )
    assert "stop" in stopped["detail"], stopped
    since = probe.mark()
    probe.publish(topics.INSTRUCTION.name, "   ")
    rejected = probe.answer(since, lambda s: s.get("state") == "rejected", planner)
    assert "empty" in rejected["detail"], rejected
    assert planner.alive(), planner.report()


def test_the_recorder_drops_bad_status_lines_and_still_records_an_episode(bad_messages_graph):
    probe, nodes, recordings = bad_messages_graph
    recorder = nodes["recorder"]
    for _name, payload in BAD_STATUS_LINES:
        probe.publish(topics.STATUS.name, payload)
    probe.publish(topics.STATUS.name, b"\x00\x01\x00\x00\xff")  # no String's CDR at all
    path = record_episode(probe, recorder, recordings, "Survived bad lines")
    assert path.stat().st_size > 0
    assert recorder.alive(), recorder.report()
