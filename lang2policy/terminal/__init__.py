"""The lang2policy terminal, without ROS: parse typed lines, dispatch them, fold live status.

The ROS node (``lang2policy.ros.terminal_node``) supplies a ``Backend`` (topics and services)
and feeds status messages in; everything else lives here and is tested without ROS.
"""

from lang2policy.terminal.app import run_interactive, run_non_interactive
from lang2policy.terminal.commands import (
    HELP,
    Command,
    CommandKind,
    TerminalInputError,
    check_text,
    parse_line,
)
from lang2policy.terminal.console import (
    Backend,
    Console,
    HistoryEntry,
    Reply,
    ServiceAnswer,
)
from lang2policy.terminal.fleet import Fleet
from lang2policy.terminal.render import prompt_label, render_toolbar, toolbar_segments
from lang2policy.terminal.status import Notice, StatusModel

__all__ = [
    "HELP",
    "Backend",
    "Command",
    "CommandKind",
    "Console",
    "Fleet",
    "HistoryEntry",
    "Notice",
    "Reply",
    "ServiceAnswer",
    "StatusModel",
    "TerminalInputError",
    "check_text",
    "parse_line",
    "prompt_label",
    "render_toolbar",
    "run_interactive",
    "run_non_interactive",
    "toolbar_segments",
]
