"""A static pre-check of policy code, run in the host before anything starts.

It gives fast, specific feedback (for a person, or for the LLM's repair attempt) on code that
could never pass the sandbox: imports outside the allow-list, dunder and frame attributes,
introspection builtins, format-string field access. It is a convenience, not the boundary:
the red-team suite runs every attack with it switched off.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

ALLOWED_IMPORTS = frozenset({"numpy", "math"})

# Attributes that reach frames, code objects or generator internals without an underscore
# (RestrictedPython's INSPECT_ATTRIBUTES plus async generators), and format helpers.
FORBIDDEN_ATTRIBUTES = frozenset(
    [
        "tb_frame",
        "tb_next",
        "tb_lasti",
        "f_back",
        "f_builtins",
        "f_code",
        "f_generator",
        "f_globals",
        "f_locals",
        "f_trace",
        "co_code",
        "gi_frame",
        "gi_code",
        "gi_yieldfrom",
        "gi_running",
        "cr_await",
        "cr_frame",
        "cr_code",
        "cr_origin",
        "ag_frame",
        "ag_code",
        "ag_await",
        "format_map",
        "mro",
        "func_globals",
        "func_code",
        "im_func",
        "im_self",
        "ctypes",
        "ctypeslib",
        "tofile",
        "dump",
        "dumps",
    ]
)
FORBIDDEN_NAMES = frozenset(
    [
        "eval",
        "exec",
        "compile",
        "open",
        "getattr",
        "setattr",
        "delattr",
        "hasattr",
        "globals",
        "locals",
        "vars",
        "dir",
        "type",
        "object",
        "memoryview",
        "breakpoint",
        "help",
        "input",
        "exit",
        "quit",
        "id",
        "__import__",
        "__builtins__",
        "__loader__",
        "__spec__",
        "BaseException",
    ]
)
MAX_SOURCE_BYTES = 64 * 1024
MAX_NESTING = 60


@dataclass(frozen=True)
class Violation:
    """One thing the static check refuses, and the line it is on (0: the whole program)."""

    line: int  # 1-based; 0 for the program as a whole
    message: str  # what is refused and why, for the LLM's repair prompt

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


class _Checker(ast.NodeVisitor):
    def __init__(self, defined: set[str]) -> None:
        self.violations: list[Violation] = []
        self._defined = defined  # names the program binds itself (a variable called ``id``)
        self._depth = 0

    def _flag(self, node: ast.AST, message: str) -> None:
        self.violations.append(Violation(getattr(node, "lineno", 0), message))

    def generic_visit(self, node: ast.AST) -> None:
        self._depth += 1
        if self._depth == MAX_NESTING:
            self._flag(node, f"code is nested more than {MAX_NESTING} levels deep")
        super().generic_visit(node)
        self._depth -= 1

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._check_module(node, alias.name)
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            self._flag(node, "relative imports are not allowed")
        self._check_module(node, node.module or "")
        if any(alias.name == "*" for alias in node.names):
            self._flag(node, "'import *' is not allowed; import the names you use")
        self.generic_visit(node)

    def _check_module(self, node: ast.AST, name: str) -> None:
        if name not in ALLOWED_IMPORTS:
            allowed = ", ".join(sorted(ALLOWED_IMPORTS))
            self._flag(node, f"import of '{name}' is not allowed; allowed modules: {allowed}")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr.startswith("_"):
            self._flag(node, f"attribute '{node.attr}' is private; only public names may be used")
        elif node.attr in FORBIDDEN_ATTRIBUTES:
            self._flag(node, f"attribute '{node.attr}' is not allowed in policy code")
        elif node.attr == "format" and not _plain_format_call(node):
            self._flag(node, "str.format may only use a literal template without '.' or '['")
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id.startswith("__") or (
            node.id in FORBIDDEN_NAMES and node.id not in self._defined
        ):
            self._flag(node, f"name '{node.id}' is not available in policy code")
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str | bytes) and _has_dunder(node.value):
            self._flag(node, "strings containing '__' are not allowed (no computed dunder names)")
        self.generic_visit(node)

    def visit_TryStar(self, node: ast.AST) -> None:
        self._flag(node, "'except*' is not allowed")
        self.generic_visit(node)

    def _no_async(self, node: ast.AST) -> None:
        self._flag(node, "async code is not allowed in policy code")
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_Await = visit_AsyncFor = visit_AsyncWith = _no_async
    visit_Global = visit_Nonlocal = generic_visit


def _has_dunder(value: str | bytes) -> bool:
    return "__" in value if isinstance(value, str) else b"__" in value


def _plain_format_call(node: ast.Attribute) -> bool:
    """``"...".format(...)`` on a literal whose replacement fields are plain (no . or [)."""
    template = node.value
    if not (isinstance(template, ast.Constant) and isinstance(template.value, str)):
        return False
    fields = template.value.split("{")[1:]
    return all("." not in f.split("}")[0] and "[" not in f.split("}")[0] for f in fields)


def check_source(source: str) -> list[Violation]:
    """Violations in ``source`` (empty: it may run). Raises ``SyntaxError`` if it does not parse."""
    if len(source.encode("utf-8", "replace")) > MAX_SOURCE_BYTES:
        return [Violation(0, f"program is longer than {MAX_SOURCE_BYTES // 1024} KiB")]
    if "\x00" in source:
        return [Violation(0, "program contains a NUL character")]
    try:
        tree = ast.parse(source, "<policy>")
        checker = _Checker(_bound_names(tree))
        checker.visit(tree)
    except (RecursionError, MemoryError):
        return [Violation(0, "program is too deeply nested to check")]
    return checker.violations


def _bound_names(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
    return {n for n in names if not n.startswith("__")}
