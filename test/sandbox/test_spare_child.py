"""A sandbox child started ahead of need: handed over started, replaced, confined as any child."""

from __future__ import annotations

import time

import pytest

from lang2policy.sandbox.policy import default_policy
from lang2policy.sandbox.runner import SandboxLimits, SandboxRunner
from lang2policy.sandbox.spare_child import SpareChild
from lang2policy.session.sim import SimSession
from lang2policy.skills.backend import SimSkillBackend

LIMITS = SandboxLimits(wall_seconds=5, cpu_seconds=5, memory_mb=512)


def wait_for_spare(spare: SpareChild, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while spare._spare is None:
        assert time.monotonic() < deadline, "no spare child started"
        time.sleep(0.05)
    return spare._spare


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


@pytest.fixture
def spare():
    spare = SpareChild()
    yield spare
    spare.close()


def test_take_hands_over_the_child_started_ahead_and_starts_the_next(spare):
    spare.prepare(LIMITS.max_message_bytes)
    ahead = wait_for_spare(spare)
    child = spare.take(LIMITS.max_message_bytes)
    assert child is ahead and child.exit_status(wait=0.0) is None
    following = wait_for_spare(spare)
    assert following is not child and following.pid != child.pid
    child.kill()
    spare.close()
    assert not alive(following.pid)  # closing kills the spare
    later = spare.take(LIMITS.max_message_bytes)  # closed: started on demand, no new spare
    time.sleep(0.5)
    assert spare._spare is None
    later.kill()


def test_a_dead_spare_or_one_of_another_kind_is_replaced(spare):
    spare.prepare(LIMITS.max_message_bytes)
    dead = wait_for_spare(spare)
    dead.kill()
    child = spare.take(LIMITS.max_message_bytes)
    assert child is not dead and child.exit_status(wait=0.0) is None
    child.kill()
    other = wait_for_spare(spare)
    child = spare.take(LIMITS.max_message_bytes // 2)
    assert child is not other and child.max_message_bytes == LIMITS.max_message_bytes // 2
    assert not alive(other.pid)
    child.kill()


def test_programs_run_on_spare_children_move_the_arm_and_stay_confined(spare):
    session = SimSession("so101")
    session.reset(3, ["red block", "blue bowl"])
    runner = SandboxRunner(
        SimSkillBackend(session), default_policy(session.world.description), limits=LIMITS
    )
    runner.start_child = spare.take
    spare.prepare(LIMITS.max_message_bytes)
    wait_for_spare(spare)
    outcome = runner.run("put_first_on_second('red block', 'blue bowl')")
    assert outcome.ok, outcome
    assert session.world.is_in("red block", "blue bowl")
    runner.ast_check = False  # the child itself must refuse it
    escape = runner.run("say(str(len(open('/etc/hostname').read())))")
    assert escape.kind == "runtime" and "'open' is not defined" in escape.message, escape
    assert escape.layers == {"namespaces": "on", "rlimits": "on", "seccomp": "on"}
