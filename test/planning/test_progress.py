"""Progress while the planner waits for a slow LLM (a loaded 2-core machine), and start-up
instructions held until the planner is ready (issue 33)."""

from __future__ import annotations

import threading
import time

from lang2policy.conductor.start_gate import MAX_HELD, StartGate
from lang2policy.planning import progress
from lang2policy.planning.cap import GeneratedProgram
from lang2policy.planning.loop import PlanLoop
from lang2policy.sandbox.policy import default_policy
from lang2policy.sandbox.runner import SandboxLimits, SandboxRunner
from lang2policy.session.sim import SimSession
from lang2policy.skills.backend import SimSkillBackend
from lang2policy.skills.catalog import SKILLS


class Config:
    timeout_s = 90.0


class SlowLLM:
    config = Config()


class SlowPlanner:
    """An LLM planner on a busy machine: each program takes ``seconds`` to come."""

    llm = SlowLLM()

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def generate(self, instruction, objects, history):
        time.sleep(self.seconds)
        code = "say('here')"
        return GeneratedProgram(code=code, main=code, llm_calls=1, llm_seconds=self.seconds)


def test_a_slow_llm_call_shows_its_wait_and_budget(monkeypatch):
    monkeypatch.setattr(progress, "EVERY_S", 0.3)
    session = SimSession("so101")
    session.reset(0, ["red block", "blue bowl"])
    backend = SimSkillBackend(session)
    policy = default_policy(backend.description, known_skills=SKILLS)
    runner = SandboxRunner(backend, policy, limits=SandboxLimits(wall_seconds=30))
    loop = PlanLoop(SlowPlanner(1.0), runner, backend)
    lines: list[str] = []
    result = loop.handle("where is the red block?", lines.append)
    assert result.program is not None  # it got an answer
    waits = [line for line in lines if "waiting for the LLM" in line]
    assert len(waits) >= 2, lines
    assert all("of at most 90 s" in line for line in waits)


def test_waiting_stops_saying_when_the_wait_ends():
    lines: list[str] = []
    with progress.waiting(lines.append, "x", None, every=0.05):
        time.sleep(0.22)
    count = len(lines)
    time.sleep(0.2)
    assert count >= 2 and len(lines) == count
    assert lines[0].startswith("planning: waiting for x … ")


def test_instructions_before_ready_are_held_in_order_then_released():
    gate = StartGate()
    assert [gate.hold(f"i{n}") for n in range(MAX_HELD)] == ["queued"] * MAX_HELD
    assert gate.hold("one too many") == "full"
    released: list[list[str]] = []
    opener = threading.Thread(target=lambda: released.append(gate.open()))
    opener.start()
    opener.join()
    assert released == [[f"i{n}" for n in range(MAX_HELD)]]
    assert gate.is_open and gate.hold("after") == "" and gate.open() == []
