"""The two front ends of the terminal: a prompt_toolkit prompt with a live status toolbar, and a
non-interactive loop over lines (stdin) for scripts, pipes and tests."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from lang2policy.terminal.commands import CommandKind
from lang2policy.terminal.console import Console
from lang2policy.terminal.fleet import Fleet
from lang2policy.text_quote import one_line

BANNER = "lang2policy terminal: type an instruction; :help for commands, :quit or Ctrl-D to leave."
TOOLBAR_STYLES = {"": "", "warn": "class:toolbar-warn", "alert": "class:toolbar-alert"}


def run_non_interactive(
    console: Console | Fleet,
    lines: Iterable[str],
    out: Callable[[str], None] = print,
    wait: bool = True,
    timeout: float = 120.0,
) -> int:
    """Dispatch ``lines`` one by one, echoing each as ``> line``; with ``wait``, an instruction
    blocks until the planner's final answer (or ``timeout`` s). Returns 0 when every line was
    accepted, every service call succeeded and every awaited instruction ended ``done``, else 1.
    """
    failures = 0
    for line in lines:
        if not line.strip():
            continue
        out(f"> {one_line(line.strip())}")  # a piped line is shown, never acted out
        reply = console.handle_line(line)
        for text in reply.lines:
            out(text)
        failures += not reply.ok
        if reply.quit:
            break
        entry = reply.entry
        if wait and entry is not None and entry.kind == CommandKind.INSTRUCTION:
            ok = console.wait_outcome(entry, timeout)
            if ok is None:
                out(f"! no final status for '{entry.text}' within {timeout:g} s")
            failures += not ok
    return 0 if failures == 0 else 1


def run_interactive(console: Console | Fleet, refresh_interval: float = 0.5) -> int:
    """A prompt on a plain terminal (ssh, tmux; no mouse): status lines print above it, the
    bottom toolbar is redrawn every ``refresh_interval`` s. Ctrl-D, Ctrl-C or :quit leave."""
    from prompt_toolkit import PromptSession
    from prompt_toolkit.patch_stdout import patch_stdout
    from prompt_toolkit.styles import Style

    style = Style.from_dict(
        {
            "bottom-toolbar": "noreverse bg:ansiblue fg:ansiwhite",
            "toolbar-warn": "bg:ansiblue fg:ansiyellow bold",
            "toolbar-alert": "bg:ansired fg:ansiwhite bold",
        }
    )
    prompt = PromptSession(style=style, refresh_interval=refresh_interval)

    def toolbar():
        return _formatted_toolbar(console, prompt.app.output.get_size().columns)

    with patch_stdout(raw=True):
        print(BANNER)
        while True:
            try:
                line = prompt.prompt(console.prompt, bottom_toolbar=toolbar)
            except (EOFError, KeyboardInterrupt):
                return 0
            reply = console.handle_line(line)
            for text in reply.lines:
                print(text)
            if reply.quit:
                return 0


def _formatted_toolbar(console: Console | Fleet, width: int) -> list[tuple[str, str]]:
    """The toolbar segments as prompt_toolkit formatted text, cut to ``width`` columns."""
    pieces: list[tuple[str, str]] = []
    left = max(width - 1, 1)
    for index, (style, text) in enumerate(console.segments()):
        part = (" | " if index else " ") + text
        if len(part) > left:
            pieces.append((TOOLBAR_STYLES.get(style, ""), part[: max(left - 1, 0)] + "…"))
            break
        pieces.append((TOOLBAR_STYLES.get(style, ""), part))
        left -= len(part)
    return pieces
