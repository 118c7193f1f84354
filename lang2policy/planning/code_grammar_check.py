"""The code grammar's rules checked after decoding, for endpoints that cannot decode under a
grammar (an OpenAI chat model) and as a second look at what a llama.cpp server returned.

``check_program(code, objects)`` lists what is wrong with a program, one sentence each, empty
when nothing is: it does not parse; it calls a skill with the wrong arguments (too many, an
unknown keyword, a required one missing, one given twice); an object argument, or an object-like
string literal anywhere outside free text (``'<colour> block'``), names an object that is not on
the table; a ``choices`` argument (a corner) is not one of them; it calls a function that is no
skill, no builtin the sandbox provides and not defined in the program; it reads a name that
nothing assigns (``put_first_on_second(block, ...)`` with no ``block = ...``). The sentences
are meant for the repair prompt and the candidate scorer.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence
from typing import TypeGuard

from lang2policy.instruction_text import COLOURS
from lang2policy.planning.codegen import undefined_calls, undefined_names
from lang2policy.skills.catalog import SKILLS
from lang2policy.skills.spec import Param, Skill

# The kinds of object names (colour + kind, see get_obj_names in the catalog): a two-word
# literal of a colour and one of them (or the colour and kind of an object present) is an
# object name; 'the block' is a description.
OBJECT_KINDS = ("block", "bowl")


def check_program(
    code: str, objects: Sequence[str], provided: Iterable[str] = (), *, helpers: bool = False
) -> list[str]:
    """What breaks the code grammar's rules in ``code`` on a table with ``objects`` (see the
    module docstring); ``provided``: functions the planner supplies (parsing helpers);
    ``helpers``: calls of undefined functions are fine (code the function generator has yet
    to complete, as the grammar allows)."""
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        return [f"the program does not parse: line {exc.lineno}: {exc.msg}"]
    if not tree.body:
        return ["the program is empty"]
    problems: list[str] = []
    free: set[int] = set()  # ids of string literals that are free text
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            free.update(id(n) for n in ast.walk(node))
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            continue
        skill = SKILLS.get(node.func.id)
        if skill is None:
            if node.func.id in set(provided) and node.args:
                free.add(id(node.args[0]))  # a parsing helper's description
            continue
        bound, arity = _bind(skill, node)
        problems += [f"line {node.lineno}: {p}" for p in arity]
        for param, value in bound:
            problems += [f"line {node.lineno}: {p}" for p in _literal(skill, param, value, objects)]
            free.add(id(value))  # checked against its parameter: not again as a loose literal
    problems += _object_literals(tree, objects, free)
    for name in [] if helpers else undefined_calls(code, provided):
        problems.append(
            f"'{name}' is not a skill and the program does not define it (skills: "
            f"{', '.join(SKILLS)})"
        )
    for name in [] if helpers else undefined_names(code, provided):
        problems.append(
            f"the name {name!r} is used but never assigned (name an object present as a "
            f"string, e.g. {(list(objects) or ['red block'])[0]!r})"
        )
    return list(dict.fromkeys(problems))


def _bind(skill: Skill, call: ast.Call) -> tuple[list[tuple[Param, ast.expr]], list[str]]:
    """The (parameter, argument) pairs of ``call`` and what is wrong with its arity."""
    params, problems = skill.params, []
    if any(isinstance(a, ast.Starred) for a in call.args) or any(
        k.arg is None for k in call.keywords
    ):
        return [], []  # *args / **kwargs: checked when it runs
    names = [p.name for p in params] or ["none"]
    if len(call.args) > len(params):
        problems.append(
            f"{skill.name}() takes at most {len(params)} arguments ({', '.join(names)}), "
            f"got {len(call.args)}"
        )
    bound = list(zip(params, call.args, strict=False))
    given = {p.name for p, _ in bound}
    for kw in call.keywords:
        param = skill.param(str(kw.arg))
        if param is None:
            problems.append(
                f"{skill.name}() has no argument '{kw.arg}' (it takes {', '.join(names)})"
            )
        elif param.name in given:
            problems.append(f"{skill.name}() got '{param.name}' twice")
        else:
            given.add(param.name)
            bound.append((param, kw.value))
    missing = [p.name for p in params if p.required and p.name not in given]
    if missing:
        problems.append(f"{skill.name}() is missing {', '.join(missing)}")
    return bound, problems


def _is_text(node: ast.AST) -> TypeGuard[ast.Constant]:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _literal(skill: Skill, param: Param, value: ast.expr, objects: Sequence[str]) -> list[str]:
    if not _is_text(value):
        return []
    text = value.value
    if param.kind in ("object", "place") and text not in objects:
        return [
            f"{skill.name}({param.name}={text!r}): there is no {text!r} on the table "
            f"(objects: {', '.join(objects) or 'none'})"
        ]
    if param.choices and text not in param.choices:
        return [
            f"{skill.name}({param.name}={text!r}): not one of "
            f"{', '.join(repr(c) for c in param.choices)}"
        ]
    return []


def _object_literals(tree: ast.AST, objects: Sequence[str], free: set[int]) -> list[str]:
    """Object-like literals ('<colour> <kind>') outside free text that name no object present."""
    kinds = {*OBJECT_KINDS, *(o.split()[-1] for o in objects if o.split())}
    colours = {*COLOURS, *(o.split()[0] for o in objects if len(o.split()) > 1)}
    problems = []
    for node in ast.walk(tree):
        if not _is_text(node) or id(node) in free:
            continue
        text = str(node.value)  # a str (_is_text)
        words = text.split()
        object_like = len(words) == 2 and words[0] in colours and words[1] in kinds
        if object_like and text not in objects:
            problems.append(
                f"line {node.lineno}: {text!r} names no object on the table "
                f"(objects: {', '.join(objects) or 'none'})"
            )
    return problems
