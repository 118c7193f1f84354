"""Odd arguments are refused with a clear message, never a host error (issue 13, finding 8).

A 400-digit integer or a 500-deep list passed to a skill from policy code ends the plan as
``invalid`` with the arm where it was (not ``crashed``); the host's binder and the sandbox
channel refuse what is too deep or too long with their own errors only; the command line
refuses non-UTF-8 instruction bytes and a negative seed with a usage message, no traceback.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lang2policy.errors import InvalidIntentError
from lang2policy.sandbox.policy import default_policy
from lang2policy.sandbox.process import ProtocolError
from lang2policy.sandbox.runner import SandboxLimits, SandboxRunner
from lang2policy.skills.backend import SimSkillBackend
from lang2policy.skills.catalog import SKILLS
from lang2policy.skills.spec import Param, Skill

ROOT = Path(__file__).resolve().parents[2]
FAST = SandboxLimits(wall_seconds=3, cpu_seconds=3, memory_mb=512)
LIMIT = 1 << 20


@pytest.fixture
def block_and_bowl(session):
    session.reset(3, ["red block", "blue bowl"])
    return session


def joints(session) -> np.ndarray:
    return session.robot.get_observation().position.copy()


def run(block_and_bowl, source: str):
    runner = SandboxRunner(
        SimSkillBackend(block_and_bowl),
        default_policy(block_and_bowl.world.description),
        limits=FAST,
    )
    before = joints(block_and_bowl)
    outcome = runner.run(source)
    block_and_bowl.world.step_seconds(0.5)
    assert np.abs(joints(block_and_bowl)[:-1] - before[:-1]).max() < 0.02, "the arm moved"
    return outcome


# ---------------------------------------------------------------- real sandbox runs
def test_a_400_digit_coordinate_is_an_invalid_call(block_and_bowl):
    outcome = run(block_and_bowl, "move_to([10**400, 0, 0.1])\n")
    assert outcome.kind == "invalid", outcome.summary()
    assert [i.decision for i in outcome.intents] == ["invalid"]  # the host's binder said so
    assert "not a finite number" in outcome.message and "allowed: a point" in outcome.message


def test_a_500_deep_list_is_an_invalid_call(block_and_bowl):
    source = (
        "nested = [0.3, 0.0, 0.1]\nfor _ in range(500):\n    nested = [nested]\nmove_to(nested)\n"
    )
    outcome = run(block_and_bowl, source)
    assert outcome.kind == "invalid", outcome.summary()
    assert "levels deep" in outcome.message and outcome.line == 4


def test_a_program_may_catch_the_refusal_and_go_on(block_and_bowl):
    source = (
        "try:\n    move_to([10**400, 0, 0.1])\nexcept SkillError as exc:\n"
        "    say('refused: ' + exc.kind)\n"
    )
    outcome = run(block_and_bowl, source)
    assert outcome.ok and outcome.said == ["refused: invalid"]


# ---------------------------------------------------------------- the host's binder
def _deep(levels: int) -> list:
    value: list = [0.3, 0.0, 0.1]
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ([10**400, 0, 0.1], "not a finite number"),
        ([10**5000, 0, 0.1], "not a finite number"),  # past Python's int-to-str limit
        ([1e308 * 10, 0, 0.1], "not a finite number"),
        (_deep(500), "levels deep"),
        (_deep(100_000), "levels deep"),  # deeper than any recursion limit
    ],
    ids=["400-digits", "5000-digits", "inf", "500-deep", "100000-deep"],
)
def test_the_binder_refuses_with_its_own_error(value, says):
    with pytest.raises(InvalidIntentError, match=says):
        SKILLS["move_to"].bind({"position": value})


def test_an_integer_parameter_refuses_a_huge_integer_with_the_allowed_range():
    skill = Skill("count", "query", (Param("n", "integer", "how many", 1, 1, 10),), "none", "")
    with pytest.raises(InvalidIntentError, match=r"too large.*allowed: an integer >= 1 and <= 10"):
        skill.bind({"n": 10**400})
    assert skill.bind({"n": 3}) == {"n": 3}


# ---------------------------------------------------------------- the channel
@pytest.mark.parametrize(
    "line",
    [
        b'{"type": "call", "args": ' + b"[" * 500 + b"]" * 500 + b"}",
        b'{"type": "call", "args": ' + b"[" * 200_000 + b"]" * 200_000 + b"}",
        b'{"type": "call", "id": ' + b"9" * 5000 + b"}",
        b'{"type": "call", "id": 0.' + b"1" * 2000 + b"}",
        b'{"type": "print", "text": "\xff"}',
    ],
    ids=["500-deep", "200000-deep", "5000-digits", "2000-char-float", "not-utf8"],
)
def test_the_channel_decoder_raises_only_protocol_errors(line):
    from lang2policy.sandbox.process import decode_message

    with pytest.raises(ProtocolError):
        decode_message(line, LIMIT)


def test_the_channel_still_carries_ordinary_messages():
    from lang2policy.sandbox.process import decode_message

    message = {"type": "call", "id": 7, "skill": "move_to", "args": {"position": [0.3, 0, 0.1]}}
    assert decode_message(json.dumps(message).encode(), LIMIT) == message
    big = {"type": "call", "id": 10**400, "skill": "x", "args": {}}  # the binder's to refuse
    assert decode_message(json.dumps(big).encode(), LIMIT)["id"] == 10**400


# ---------------------------------------------------------------- the command line
def cli(*args: str | bytes) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "lang2policy.cli", *args],
        cwd=ROOT,
        capture_output=True,
        timeout=120,
    )


REPLAY = "replay:test/fixtures/llm/cap_session.jsonl"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["run", b"\xff\xfe put the red block in the blue bowl"], "byte 0xff at offset 0"),
        (["run", b"put the red block in the \xe9 bowl"], "byte 0xe9 at offset 25"),
        (["run", "put it back", "--objects", b"red block,\xffbowl"], "byte 0xff at offset 10"),
        (["run", "put the red block in the blue bowl", "--seed", "-5"], "-5 is out of range"),
        (["exec-policy", "PROGRAM", "--seed", "-5"], "-5 is out of range"),
        (["demo", "--scripted", "--seed", "-5"], "-5 is out of range"),
    ],
    ids=["run-bytes", "run-latin1", "objects-bytes", "run-seed", "exec-seed", "demo-seed"],
)
def test_the_command_line_refuses_bad_input_without_a_traceback(args, says, tmp_path):
    program = tmp_path / "plan.py"
    program.write_text("say('hi')\n")
    args = [str(program) if a == "PROGRAM" else a for a in args]
    result = cli(*args, "--llm", REPLAY) if args[0] == "run" else cli(*args)
    stderr = result.stderr.decode("utf-8", "replace")
    assert result.returncode == 2, stderr
    assert "Traceback" not in stderr and says in stderr, stderr
    assert "UTF-8" in stderr or "from 0 to 4294967295" in stderr  # says what is allowed


def test_seeds_from_0_to_2_to_the_32_minus_1_are_accepted():
    from lang2policy import cli_types

    assert cli_types.seed("0") == 0 and cli_types.seed("4294967295") == 2**32 - 1
    for bad in ("-1", "4294967296", "1.5", "9" * 5000):
        with pytest.raises(argparse.ArgumentTypeError, match="from 0 to 4294967295"):
            cli_types.seed(bad)
