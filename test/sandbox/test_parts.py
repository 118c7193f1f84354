"""Sandbox building blocks on their own: the static pre-check, the host's message decoding,
the seccomp program, and the child's confinement layers."""

from __future__ import annotations

import time

import pytest

from lang2policy.sandbox import seccomp
from lang2policy.sandbox.ast_check import check_source
from lang2policy.sandbox.process import ChildExited, ChildProcess, ProtocolError


def messages(source: str) -> list[str]:
    return [v.message for v in check_source(source)]


@pytest.mark.parametrize(
    ("source", "fragment"),
    [
        ("import os", "import of 'os'"),
        ("from numpy import *", "import *"),
        ("x = ().__class__", "__class__"),
        ("f = lambda: 0\nf.__globals__", "__globals__"),
        ("g = (i for i in [1])\ng.gi_frame", "gi_frame"),
        ("try:\n    1/0\nexcept Exception as e:\n    e.__traceback__", "__traceback__"),
        ("eval('1')", "'eval'"),
        ("getattr(1, 'real')", "'getattr'"),
        ("'{0.real}'.format(1)", "str.format"),
        ("s = 'x'\ns.format(1)", "str.format"),
        ("x = '__' + 'class__'", "'__'"),
        ("async def f():\n    pass", "async"),
        ("try:\n    pass\nexcept* ValueError:\n    pass", "except*"),
        ("x = " + "[" * 70 + "1" + "]" * 70, "nested"),
        ("x = 1\x00", "NUL"),
    ],
)
def test_precheck_flags(source, fragment):
    assert any(fragment in m for m in messages(source)), messages(source)


def test_precheck_sees_normalised_lookalike_identifiers():
    assert any("'eval'" in m for m in messages("ｅｖａｌ('1')"))


def test_precheck_accepts_code_as_policies_style_code():
    source = """
import numpy as np
from math import pi
def above(p, h=0.05):
    return np.asarray(p) + np.array([0, 0, h])
for name in get_obj_names():
    if name.endswith("block"):
        id = name  # a variable may shadow a builtin name
        print("{} at {}".format(id, above(get_obj_pos(id))), f"{pi:.2f}")
"""
    assert messages(source) == []


def test_precheck_raises_syntax_error_with_line():
    with pytest.raises(SyntaxError) as info:
        check_source("x = 1\nif x\n")
    assert info.value.lineno == 2


def test_seccomp_program_is_well_formed():
    program = seccomp.build_x86_64_filter()
    assert len(program) % 8 == 0
    assert 0 < len(program) // 8 < 4096  # the kernel's BPF_MAXINSNS
    numbers = [n for group in seccomp.X86_64_DENIED.values() for n in group.values()]
    assert len(numbers) == len(set(numbers)), "a syscall listed twice"
    for required in (
        "open",
        "openat",
        "socket",
        "connect",
        "execve",
        "fork",
        "clone",
        "clone3",
        "kill",
        "ptrace",
        "setrlimit",
        "prlimit64",
        "unshare",
    ):
        assert any(required in group for group in seccomp.X86_64_DENIED.values())


def start_child(code: str) -> ChildProcess:
    child = ChildProcess(max_message_bytes=1 << 16)
    child.send(
        {
            "type": "start",
            "code": code,
            "skills": [],
            "limits": {"cpu_seconds": 3, "memory_mb": 512, "max_output_bytes": 1000},
        }
    )
    return child


def test_child_reports_every_layer_active():
    with start_child("pass") as child:
        ready = child.receive(time.monotonic() + 20)
        assert ready == {
            "type": "ready",
            "layers": {"namespaces": "on", "rlimits": "on", "seccomp": "on"},
        }
        assert child.receive(time.monotonic() + 5) == {"type": "done"}


def test_host_refuses_nan_and_oversized_lines():
    forge = (
        "w = [c for c in ().__class__.__base__.__subclasses__() if c.__name__ == '_wrap_close']"
        "\nwrite = w[0].__init__.__globals__['write']\n"
    )
    with start_child(forge + 'write(1, b\'{"type": "print", "text": NaN}\\n\')') as child:
        child.receive(time.monotonic() + 20)
        with pytest.raises(ProtocolError, match="not valid JSON"):
            child.receive(time.monotonic() + 5)
    with start_child(forge + "write(1, b'x' * 200000)") as child:
        child.receive(time.monotonic() + 20)
        with pytest.raises(ProtocolError, match="longer than"):
            child.receive(time.monotonic() + 5)


def test_child_exit_is_detected():
    with start_child("raise ValueError('bad')") as child:
        child.receive(time.monotonic() + 20)
        error = child.receive(time.monotonic() + 5)
        assert error["type"] == "error" and error["exc_type"] == "ValueError"
        with pytest.raises(ChildExited):
            child.receive(time.monotonic() + 5)
