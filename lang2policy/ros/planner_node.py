"""The planner as a ROS 2 node: instructions in, plans run through the sandbox, status out.

Subscribes ``/lang2policy/instruction`` (std_msgs/String) and publishes one JSON object per
status line on ``/lang2policy/status`` (std_msgs/String): ``{"state": "received" | "planning" |
"running" | "done" | "failed" | "rejected" | "busy", "instruction": ..., "detail": ...}``.
Planning and execution run in a worker thread, one instruction at a time, so the node keeps
answering while the LLM thinks; an instruction that arrives while one is running is refused
with ``busy`` (corrections and ``stop`` arrive with the terminal and safety nodes).

Skills execute on an in-process simulated arm (``robot``, ``seed``, ``objects`` parameters);
the history of the session is kept, so follow-up instructions work.
"""

from __future__ import annotations

import json
import threading

from rcl_interfaces.msg import ParameterDescriptor
from rclpy.node import Node
from std_msgs.msg import String

from lang2policy.errors import Lang2PolicyError
from lang2policy.exec_policy import scene_readout
from lang2policy.ros.entry import spin_node
from lang2policy.run_instruction import RunRequest, build_session, check_instruction

INSTRUCTION_TOPIC = "/lang2policy/instruction"
STATUS_TOPIC = "/lang2policy/status"


class PlannerNode(Node):
    """``lang2policy_planner``: Code-as-Policies planning + sandboxed execution."""

    def __init__(self, **kwargs) -> None:
        super().__init__("lang2policy_planner", **kwargs)
        objects = self._param("objects", "", 'comma-separated objects, "" = chosen by the seed')
        request = RunRequest(
            instruction="",
            robot=self._param("robot", "so101", "robot description (config/robots/<name>.yaml)"),
            objects=tuple(o.strip() for o in objects.split(",") if o.strip()) or None,
            llm=self._param("llm", "local", "local | openai | replay:FILE | record:FILE"),
            seed=int(self._param("seed", 0, "scene seed")),
        )
        self.session, self.objects, self.planning = build_session(request)
        self._status = self.create_publisher(String, STATUS_TOPIC, 10)
        self.create_subscription(String, INSTRUCTION_TOPIC, self._on_instruction, 10)
        self._busy = threading.Lock()
        self._worker: threading.Thread | None = None
        self.get_logger().info(f"ready: {request.robot} with {', '.join(self.objects)}")

    def _param(self, name: str, default, description: str):
        descriptor = ParameterDescriptor(description=description, read_only=True)
        return self.declare_parameter(name, default, descriptor).value

    def publish_status(self, state: str, instruction: str, detail: object = "") -> None:
        message = String()
        message.data = json.dumps({"state": state, "instruction": instruction, "detail": detail})
        self._status.publish(message)
        self.get_logger().info(f"{state}: {instruction} {detail if detail else ''}".rstrip())

    def _on_instruction(self, message: String) -> None:
        try:
            instruction = check_instruction(message.data)
        except Lang2PolicyError as exc:
            self.publish_status("rejected", message.data[:200], str(exc))
            return
        if not self._busy.acquire(blocking=False):
            self.publish_status("busy", instruction, "another instruction is running")
            return
        self.publish_status("received", instruction)
        self._worker = threading.Thread(target=self._handle, args=(instruction,), daemon=True)
        self._worker.start()

    def _handle(self, instruction: str) -> None:
        try:
            result = self.planning.handle(
                instruction,
                on_status=lambda line: self.publish_status("running", instruction, line),
            )
            outcome = result.outcome
            detail = {
                "outcome": outcome.kind,
                "message": outcome.message,
                "attempts": result.attempts,
                "code": result.program.code if result.program else "",
                "relations": scene_readout(self.session)["relations"],
            }
            self.publish_status("done" if outcome.ok else "failed", instruction, detail)
        except Exception as exc:  # the node must survive any planning error
            self.publish_status("failed", instruction, f"{type(exc).__name__}: {exc}")
        finally:
            self._busy.release()

    def wait_idle(self, timeout: float | None = None) -> None:
        if self._worker is not None:
            self._worker.join(timeout)

    def destroy_node(self) -> None:
        self.wait_idle(timeout=1.0)  # a running plan gets a moment to finish its status
        super().destroy_node()


def main(args=None) -> int:
    """Console entry ``planner_node``."""
    return spin_node(PlannerNode, "planner_node", args)


if __name__ == "__main__":
    raise SystemExit(main())
