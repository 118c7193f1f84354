"""Which already written helper can stand in for a call: the function generator reuses a helper
of its library (the function-writing prompt's examples) only when the program's calls fit its
signature."""

from __future__ import annotations

import ast
from typing import TypeGuard


def accepts_call(definition: str | None, source: str, name: str) -> bool:
    """Whether the function ``definition`` (its source; None: no definition) accepts every
    call of ``name`` in ``source`` as written: no more positional arguments than it takes, its
    required parameters given, every keyword one of its parameters."""
    if definition is None:
        return False
    try:
        function = ast.parse(definition).body[0]
        tree = ast.parse(source)
    except (SyntaxError, IndexError):
        return False
    if not isinstance(function, ast.FunctionDef):
        return False
    spec = function.args
    names = [a.arg for a in spec.args]
    required = len(names) - len(spec.defaults)
    for call in (n for n in ast.walk(tree) if calls(n, name)):
        if any(isinstance(a, ast.Starred) for a in call.args) or any(
            k.arg is None for k in call.keywords
        ):
            return False
        keywords = {k.arg for k in call.keywords}
        given = len(call.args)
        too_many = given > len(names) and spec.vararg is None
        unknown = keywords - set(names) and spec.kwarg is None
        missing = any(n not in keywords for n in names[given:required])
        if too_many or unknown or missing:
            return False
    return True


def calls(node: ast.AST | None, name: str) -> TypeGuard[ast.Call]:
    """Whether ``node`` is a call of the plain name ``name``."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name
