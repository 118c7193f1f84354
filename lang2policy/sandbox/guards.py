"""Python-level guards inside the sandbox child: restricted builtins, an import allow-list,
curated modules and an audit hook.

These are defence in depth and clear error messages, not the boundary: CPython's own docs say
audit hooks and restricted namespaces can be bypassed. The boundary is the OS confinement in
``confine.py``; every red-team test runs with these guards and without the host's AST check.
Runs inside the child, so it uses only the standard library (and numpy, already loaded).
"""

from __future__ import annotations

import builtins
import math
import sys
import types

import numpy

# Builtins a policy program may use. Missing on purpose: open, eval, exec, compile, __import__
# (replaced), getattr/setattr/delattr/hasattr, globals/locals/vars/dir, type, object,
# memoryview, breakpoint, help, input, exit/quit, id.
SAFE_BUILTIN_NAMES = [
    "abs",
    "all",
    "any",
    "ascii",
    "bin",
    "bool",
    "bytearray",
    "bytes",
    "callable",
    "chr",
    "classmethod",
    "complex",
    "dict",
    "divmod",
    "enumerate",
    "filter",
    "float",
    "format",
    "frozenset",
    "hash",
    "hex",
    "int",
    "isinstance",
    "issubclass",
    "iter",
    "len",
    "list",
    "map",
    "max",
    "min",
    "next",
    "oct",
    "ord",
    "pow",
    "property",
    "range",
    "repr",
    "reversed",
    "round",
    "set",
    "slice",
    "sorted",
    "staticmethod",
    "str",
    "sum",
    "super",
    "tuple",
    "zip",
    "__build_class__",
    "ArithmeticError",
    "AssertionError",
    "AttributeError",
    "Exception",
    "IndexError",
    "KeyError",
    "LookupError",
    "NotImplementedError",
    "OverflowError",
    "RuntimeError",
    "StopIteration",
    "TypeError",
    "ValueError",
    "ZeroDivisionError",
]

ALLOWED_MODULES = ("math", "numpy")

# numpy names that read or write files, load pickles, or expose ctypes and internals.
_NUMPY_EXCLUDED = frozenset(
    [
        "load",
        "save",
        "savez",
        "savez_compressed",
        "savetxt",
        "loadtxt",
        "genfromtxt",
        "fromfile",
        "fromregex",
        "memmap",
        "ctypeslib",
        "lib",
        "DataSource",
        "f2py",
        "testing",
        "distutils",
        "show_config",
        "show_runtime",
        "test",
        "core",
        "info",
        "get_include",
        "typing",
        "ma",
        "rec",
        "char",
        "version",
        "exceptions",
    ]
)

# Audit events refused while policy code runs (prefix match for names ending in ".").
_BLOCKED_EVENTS = (
    "open",
    "import",
    "exec",
    "compile",
    "code.__new__",
    "function.__new__",
    "object.__getattr__",
    "sys._getframe",
    "sys._current_frames",
    "sys.settrace",
    "sys.setprofile",
    "sys.addaudithook",
    "sys.excepthook",
    "builtins.input",
    "builtins.breakpoint",
    "os.",
    "subprocess.",
    "socket.",
    "ctypes.",
    "_ctypes.",
    "gc.",
    "marshal.",
    "pickle.",
    "shutil.",
    "mmap.",
    "fcntl.",
    "resource.",
    "signal.",
    "pty.",
    "urllib.",
    "http.",
    "ftplib.",
    "smtplib.",
    "webbrowser.",
    "winreg.",
    "cpython.",
)


class _State:
    policy_running = False
    exec_tokens = 0  # the runner's own exec() of the program passes the hook once


def _audit_hook(event: str, args: tuple) -> None:
    if not _State.policy_running:
        return
    if event == "exec" and _State.exec_tokens > 0:
        _State.exec_tokens -= 1
        return
    if event == "object.__setattr__":
        name = args[1] if len(args) > 1 else ""
        if isinstance(name, str) and name.startswith("__"):
            raise PermissionError(f"sandbox: setting {name} is not allowed")
        return
    for blocked in _BLOCKED_EVENTS:
        if event == blocked or (blocked.endswith(".") and event.startswith(blocked)):
            raise PermissionError(f"sandbox: '{event}' is not allowed in policy code")


def install_audit_hook() -> None:
    """Install once; inactive until ``policy_phase(True)``. Hooks cannot be removed."""
    sys.addaudithook(_audit_hook)


def policy_phase(running: bool) -> None:
    _State.policy_running = running


def start_program() -> None:
    """Enter the policy phase, letting exactly one exec (the program itself) through."""
    _State.exec_tokens = 1
    _State.policy_running = True


def _copy_module(name: str, source: types.ModuleType, exclude=frozenset()) -> types.ModuleType:
    module = types.ModuleType(name, getattr(source, "__doc__", None))
    for attr in dir(source):
        if attr.startswith("_") or attr in exclude:
            continue
        value = getattr(source, attr)
        if isinstance(value, types.ModuleType):
            if value.__name__.startswith("numpy.") and attr in ("linalg", "random", "fft"):
                value = _copy_module(value.__name__, value)
            else:
                continue
        setattr(module, attr, value)
    return module


def curated_modules() -> dict[str, types.ModuleType]:
    """Fresh module objects exposing only the public, file-free parts of numpy and math."""
    return {
        "numpy": _copy_module("numpy", numpy, _NUMPY_EXCLUDED),
        "math": _copy_module("math", math),
    }


def make_import(modules: dict[str, types.ModuleType]):
    """An ``__import__`` that hands out curated modules and refuses everything else."""

    def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
        if level != 0 or name not in modules:
            allowed = ", ".join(sorted(modules))
            raise ImportError(f"import of '{name}' is not allowed; allowed modules: {allowed}")
        return modules[name]

    return guarded_import


def restricted_builtins(print_function, modules: dict[str, types.ModuleType]) -> dict:
    table = {name: getattr(builtins, name) for name in SAFE_BUILTIN_NAMES}
    table.update(
        {
            "print": print_function,
            "__import__": make_import(modules),
            "True": True,
            "False": False,
            "None": None,
        }
    )
    return table
