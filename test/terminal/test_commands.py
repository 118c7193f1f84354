"""What typed lines mean at the terminal: stop words never reach a planner, plain text is a
correction only while a task runs, bad input gets a message saying what is allowed."""

from __future__ import annotations

import pytest

from lang2policy.planning.route import MAX_INSTRUCTION
from lang2policy.terminal import Command, CommandKind, TerminalInputError, check_text, parse_line
from lang2policy.terminal.commands import MAX_TEXT


@pytest.mark.parametrize("line", ["stop", "halt", "STOP", "  Stop!  ", "halt.", ":stop", ":halt"])
def test_stop_words_are_a_stop_command_whatever_runs(line):
    for running in (False, True):
        assert parse_line(line, running) == Command(CommandKind.STOP)


def test_a_sentence_with_stop_in_it_is_text_not_a_stop():
    assert parse_line("stop near the bowl", False) == Command(
        CommandKind.INSTRUCTION, "stop near the bowl"
    )


def test_plain_text_is_an_instruction_when_idle_and_a_correction_while_running():
    assert parse_line("  pick up the red block ", False) == Command(
        CommandKind.INSTRUCTION, "pick up the red block"
    )
    assert parse_line("a bit higher", True) == Command(CommandKind.CORRECTION, "a bit higher")


def test_do_and_fix_force_the_kind():
    assert parse_line(":do put it in the bowl", True) == Command(
        CommandKind.INSTRUCTION, "put it in the bowl"
    )
    assert parse_line(":FIX  the blue one", False) == Command(
        CommandKind.CORRECTION, "the blue one"
    )


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        (":resume", CommandKind.RESUME),
        (":reset", CommandKind.RESET),
        (":history", CommandKind.HISTORY),
        (":scene", CommandKind.SCENE),
        (":objects", CommandKind.SCENE),
        (":help", CommandKind.HELP),
        (":?", CommandKind.HELP),
        (":quit", CommandKind.QUIT),
        (":q", CommandKind.QUIT),
        (":exit", CommandKind.QUIT),
    ],
)
def test_colon_commands(line, kind):
    assert parse_line(line, True) == Command(kind)


def test_blank_lines_mean_nothing():
    assert parse_line("", False) is None
    assert parse_line("   \t ", True) is None


def test_unknown_command_lists_the_known_ones():
    with pytest.raises(
        TerminalInputError,
        match=r"unknown command ':frobnicate'; the commands are :stop, :resume, .*:fix TEXT",
    ):
        parse_line(":frobnicate", False)


def test_commands_without_arguments_refuse_one():
    with pytest.raises(TerminalInputError, match="':reset' takes no argument"):
        parse_line(":reset now please", False)


def test_do_without_text_says_the_instruction_is_empty():
    with pytest.raises(TerminalInputError, match="instruction is empty"):
        parse_line(":do   ", False)
    with pytest.raises(TerminalInputError, match="correction is empty"):
        parse_line(":fix", False)


def test_the_length_limit_is_the_planners():
    assert MAX_TEXT == MAX_INSTRUCTION


def test_too_long_text_names_both_lengths():
    text = "a" * (MAX_INSTRUCTION + 1)
    with pytest.raises(TerminalInputError, match=f"{MAX_INSTRUCTION + 1} characters; at most 500"):
        parse_line(text, False)
    assert check_text("a" * MAX_INSTRUCTION) == "a" * MAX_INSTRUCTION


@pytest.mark.parametrize("bad", ["go\x1b[2J", "left\x00", "up\x7f", "a\rb"])
def test_control_characters_are_refused_and_named(bad):
    with pytest.raises(TerminalInputError, match=r"control characters \(0x"):
        check_text(bad, "correction")


def test_tabs_are_plain_text():
    assert check_text("pick\tup") == "pick\tup"
