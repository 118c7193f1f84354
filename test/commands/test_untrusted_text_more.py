"""Untrusted text stays in its field in the remaining reports and inputs (issue 13, findings 7
and 8, follow-ups).

- ``lang2policy exec-policy`` and ``lang2policy run`` reports: said text, error messages, notes
  and object names come from the program, the LLM or the scene; a line break in them (``\\n``,
  U+2028, ``\\x85``) must not start a report line of its own (a forged ``outcome : ok``). The
  exec-policy case runs a real program through the sandbox against the simulation.
- ``check_instruction`` (the planners' shared check) refuses bytes that were not UTF-8 (lone
  surrogates, named by byte offset) and every non-printable character but a tab.
- ``--seed`` / ``--objects`` of ``lang2policy sim``, ``bench parity`` and the servo emulator:
  bad values are usage errors (exit 2), before anything starts.
- The terminal: a piped line that is not UTF-8 is refused with the byte's offset and the node
  reads on (a real terminal node process, stdin and stdout strict as under a UTF-8 locale).
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lang2policy import cli
from lang2policy.bench.registry import parser as bench_parser
from lang2policy.commands.exec_policy import ExecRequest, run_program
from lang2policy.commands.run import format_text as run_format_text
from lang2policy.errors import Lang2PolicyError
from lang2policy.graph import launcher
from lang2policy.planning.route import check_instruction
from lang2policy.terminal import Console, run_non_interactive

REPO = Path(__file__).resolve().parents[2]
FORGED = "outcome : ok"
# Every way a reader splitting with str.splitlines would see a new line start.
BREAKS = ["\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


def starts(lines: list[str], prefix: str) -> list[str]:
    return [line for line in lines if line.lstrip().startswith(prefix)]


# ------------------------------------------------------------------ exec-policy / run reports
@pytest.fixture(scope="module")
def exec_result(tmp_path_factory):
    """A real run: the program raises an exception whose text forges report lines."""
    program = tmp_path_factory.mktemp("prog") / "forge.py"
    message = "bad" + "".join(f"{b}{FORGED}" for b in BREAKS)
    program.write_text(f'say("hello")\nraise RuntimeError({message!r})\n', encoding="utf-8")
    return run_program(ExecRequest(program))


def forged(result):
    """The real result with said text and an object name that hold every line break."""
    said = [f"hi{b}{FORGED}" for b in BREAKS]
    outcome = dataclasses.replace(result.outcome, said=said)
    positions = dict(result.scene["positions"])
    positions["red\nblock\u2028" + FORGED] = [0.1, 0.2, 0.0]
    relations = [f"red block in{b}{FORGED}" for b in BREAKS]
    scene = {"positions": positions, "relations": relations}
    return dataclasses.replace(result, outcome=outcome, scene=scene)


def test_exec_policy_report_keeps_said_text_errors_and_names_in_their_fields(exec_result):
    assert exec_result.outcome.kind == "runtime"
    assert FORGED in exec_result.outcome.message  # the program's text really got this far
    result = forged(exec_result)
    text = result.format_text()
    lines = text.splitlines()
    assert len(lines) == len(text.split("\n"))  # no line break but \n in the report
    assert len(starts(lines, "outcome")) == 1 and starts(lines, "outcome")[0].startswith(
        "outcome : runtime"
    )
    said = starts(lines, "said")
    assert len(said) == 1 and said[0].count(FORGED) == len(BREAKS)
    assert "\\u2028" in said[0] and "\\x85" in said[0] and "\\n" in said[0]
    # one line per object, the forged name shown escaped on its own line
    assert len([line for line in lines if " at [" in line]) == len(result.scene["positions"])
    assert len(starts(lines, "relations")) == 1
    assert not any(line.startswith(FORGED) for line in lines)


def code_report(result) -> dict:
    outcome = result.outcome.as_dict()
    return {
        "route": "code",
        "result": {
            "instruction": "put the red block in the bowl",
            "program": {"code": f"say('x')\n# a comment\u2028{FORGED}\nraise RuntimeError('x')"},
            "attempts": 1,
            "outcome": outcome,
        },
        "scene": result.scene,
    }


def test_run_report_code_path_keeps_each_field_on_its_line(exec_result):
    result = forged(exec_result)
    text = run_format_text(code_report(result))
    lines = text.splitlines()
    assert len(lines) == len(text.split("\n"))
    outcome_lines = starts(lines, "outcome")
    assert len(outcome_lines) == 1 and outcome_lines[0].startswith("outcome: runtime - ")
    assert outcome_lines[0].count(FORGED) == len(BREAKS)
    assert len(starts(lines, "said")) == 1
    assert not any(line.startswith(FORGED) for line in lines)
    program = lines[lines.index("program:") + 1 : lines.index("attempts: 1")]
    assert len(program) == 3 and all(line.startswith("    ") for line in program)


def test_run_report_reward_path_keeps_errors_and_notes_on_their_line():
    scene = {"positions": {"red block": [0.1, 0.2, 0.0]}, "relations": []}
    planned = {
        "new_task": True,
        "plan_ms": 1200.0,
        "description": "lift it\u2028" + FORGED,
        "code": "set_l2r_goal()\x85" + FORGED,
        "notes": [f"note{b}{FORGED}" for b in BREAKS],
        "spec": {"success": {"all": [{"term": "height"}]}},
    }
    outcome = {
        "status": "done",
        "sim_seconds": 2.0,
        "iterations": 20,
        "mpc_plan_ms": 30.0,
        "final": {"height": 0.1},
    }
    report = {
        "route": "reward",
        "steps": [
            {"instruction": "lift it", "plan": None, "outcome": None, "error": f"no{FORGED}"},
            {"instruction": "lift it", "plan": None, "outcome": None, "error": "a\nb\u2028c"},
            {"instruction": "lift it higher", "plan": planned, "outcome": outcome},
        ],
        "scene": scene,
    }
    text = run_format_text(report)
    lines = text.splitlines()
    assert len(lines) == len(text.split("\n"))
    not_planned = starts(lines, "not planned")
    assert not_planned[1] == "  not planned: a\\nb\\u2028c"
    notes = starts(lines, "note:")
    assert len(notes) == len(BREAKS) and all(n.count(FORGED) == 1 for n in notes)
    assert "    lift it\\u2028" + FORGED in lines and "    set_l2r_goal()\\x85" + FORGED in lines
    assert not any(line.lstrip().startswith(FORGED) for line in lines)


# ------------------------------------------------------------------ the instruction check
@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("put the \udcff block", "the byte 0xff at offset 8 is not valid UTF-8"),
        ("red \udcc3 block", "the byte 0xc3 at offset 4 is not valid UTF-8"),
        ("go \ud800 now", r"the character \\ud800 at offset 3 is a lone surrogate"),
        ("lift it\u2028" + FORGED, r"line breaks; .*\\u2028 at offset 7"),
        ("lift\x85it", r"line breaks; .*\\x85 at offset 4"),
        ("lift\u202eit", r"\\u202e at offset 4"),  # a format character (right-to-left override)
        ("a\x07b", "control characters"),
    ],
)
def test_check_instruction_refuses_undecodable_bytes_and_line_breaks(text, message):
    with pytest.raises(Lang2PolicyError, match=message):
        check_instruction(text)


def test_check_instruction_keeps_tabs_and_unicode_text():
    assert check_instruction(" put\tthe rote Würfel in die Schüssel ") == (
        "put\tthe rote Würfel in die Schüssel"
    )


# ------------------------------------------------------------------ command lines
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["sim", "--seed", "-5"], "-5 is out of range"),
        (["sim", "--seed", str(2**32)], "out of range"),
        (["sim", "--seed", "1e3"], "is not a whole number"),
        (["sim", "--objects", "red block\nblue bowl"], r"\\n at offset 9"),
        (["sim", "--objects", "red \udcff block"], "the byte 0xff at offset 4 is not valid UTF-8"),
    ],
)
def test_bad_seed_or_objects_of_sim_is_a_usage_error(capsys, argv, message):
    """--dry-run: even where a bad value got through, the graph would not start."""
    with pytest.raises(SystemExit) as stopped:
        cli.main([*argv, "--dry-run", "--headless"])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert re.search(message, err), err


def test_bad_seed_of_bench_parity_is_a_usage_error(capsys):
    """The parser only: a seed that got through would start both back-ends."""
    with pytest.raises(SystemExit) as stopped:
        bench_parser("parity").parse_args(["--seed", "-1"])
    assert stopped.value.code == 2
    assert "-1 is out of range" in capsys.readouterr().err


def test_the_parsers_take_good_seeds():
    assert launcher.build_parser().parse_args(["--seed", "4294967295"]).seed == 2**32 - 1
    assert bench_parser("parity").parse_args(["--seed", "7"]).seed == 7
    args = launcher.build_parser().parse_args(["--objects", "red block,blue bowl"])
    assert args.objects == ("red block", "blue bowl")  # checked and split by the options table


def test_emulator_seed_is_checked_before_the_bus_starts():
    """The emulator's command line, as ``bench parity`` and people start it."""
    command = [sys.executable, "-m", "lang2policy.robots.feetech.emulator", "--seed", "-3"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=30)
    assert done.returncode == 2, done
    assert "-3 is out of range" in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""  # no port was opened


# ------------------------------------------------------------------ the terminal
class SentRecorder:
    """The ROS edge of the terminal session replaced by a recorder of what was sent."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    def publish_instruction(self, text: str) -> None:
        self.sent.append(("instruction", text))

    def publish_correction(self, text: str) -> None:
        self.sent.append(("correction", text))

    def call_service(self, which: str):
        raise AssertionError(f"no service call expected, got {which}")

    def service_name(self, which: str) -> str:
        return f"/lang2policy/{which}"


def test_terminal_session_refuses_undecodable_and_multi_line_text_and_reads_on():
    backend = SentRecorder()
    session = Console(backend, emit=lambda _line: None)
    printed: list[str] = []
    lines = [
        "put the \udcff block\n",  # as stdin with surrogateescape reads b"put the \xff block"
        ":do lift it\u2028" + FORGED + "\n",
        ":lau\u2028nch\n",
        "pick up the red block\n",
    ]
    assert run_non_interactive(session, lines, printed.append, wait=False) == 1
    assert backend.sent == [("instruction", "pick up the red block")]
    refusals = [line for line in printed if line.startswith("! ")]
    assert refusals[0].startswith("! the byte 0xff at offset 8 is not valid UTF-8")
    assert "\\u2028 at offset 7" in refusals[1]
    assert refusals[2].startswith("! unknown command ':lau\\u2028nch'")
    assert all(line.isprintable() for line in refusals)


@pytest.mark.ros
def test_terminal_node_refuses_a_line_that_is_not_utf8_and_reads_on():
    pytest.importorskip("rclpy")
    env = dict(os.environ)
    env.update(
        ROS_DOMAIN_ID=str(1 + (os.getpid() + 57) % 200),
        ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
        PYTHONIOENCODING="utf-8:strict",  # as under a UTF-8 locale: strict decoding
    )
    command = [sys.executable, "-m", "lang2policy.ros.terminal_node", "--non-interactive"]
    command += ["--no-wait", "--ros-args", "-p", "discovery_timeout:=0.5"]
    done = subprocess.run(
        command,
        input=b"put the \xff block\n:history\n",
        capture_output=True,
        env=env,
        cwd=REPO,
        timeout=60,
    )
    out = done.stdout.decode("utf-8").splitlines()
    err = done.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err and "UnicodeDecodeError" not in err, err
    assert done.returncode == 1, (out, err)  # one line refused
    refusal = "! the byte 0xff at offset 8 is not valid UTF-8; the line must be UTF-8 text"
    assert any(line.startswith(refusal) for line in out), out
    assert out[-2:] == ["> :history", "(nothing sent yet)"], out
