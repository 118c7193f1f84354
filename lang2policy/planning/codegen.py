"""Hierarchical code generation: functions a program calls but nobody defined are written by
the function-writing prompt, recursively, up to a depth limit (Code as Policies, Sec. III-B).

A name counts as undefined when the program calls it (``name(...)``), binds it nowhere (no
``def``, assignment, parameter or import), and the sandbox does not provide it: not a skill,
not a builtin the sandbox allows (``SAFE_BUILTIN_NAMES``), not ``np``/``math``/``SkillError``,
and not a name the sandbox's pre-check forbids (``open``, ``eval``: those are left for the
pre-check to reject, never generated).

Parsing sub-prompts (``parse_obj_name``, ``parse_position``) are LLM calls in the paper, made
while the program runs. The sandbox cannot call an LLM, so here they run at planning time: for
every call with a literal description, ``parse_obj_name('the block closest to the blue bowl')``,
the sub-prompt writes code that computes ``ret_val`` for that description, and the planner
generates the function as a dispatch over the descriptions the program uses. That code runs
in the sandbox with the skills, on the scene as it is then. A description that is not a literal
string (a variable, an f-string) cannot be known in advance: the function raises a ValueError
that says so, which the repair attempt sees.
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from lang2policy.planning.helper_library import accepts_call, calls
from lang2policy.planning.prompts import objects_line
from lang2policy.sandbox.ast_check import FORBIDDEN_NAMES
from lang2policy.sandbox.guards import SAFE_BUILTIN_NAMES
from lang2policy.skills.catalog import SKILLS
from lang2policy.text_quote import prompt_quote


class CodeGrammars(Protocol):
    """The grammars the generator decodes under (``code_grammar.CodeGrammars``): GBNF text
    for a main program and for one helper function."""

    @property
    def program(self) -> str: ...

    @property
    def function(self) -> str: ...


# What the sandbox's namespace provides besides the skills (lang2policy/sandbox/child.py).
SANDBOX_NAMES = frozenset(
    {*SAFE_BUILTIN_NAMES, "print", "True", "False", "None", "np", "math", "SkillError"}
)
_FENCE = re.compile(r"^\s*```[\w+-]*\s*$")

class Ask(Protocol):
    """Asks the LLM: (prompt, stop sequences, max tokens, lenient) -> answer text; a lenient call
    keeps an answer cut off at max tokens. With code grammars it gets ``grammar=<GBNF>`` too."""

    def __call__(
        self, text: str, stop: tuple[str, ...], tokens: int, lenient: bool, /, *, grammar: str = ...
    ) -> str: ...


FUNCTION_STOP = ("\n#", "\n\n\n")
FUNCTION_MAX_TOKENS = 256
PARSE_STOP = ("\n#", "\nobjects =", "\n\n\n")
PARSE_MAX_TOKENS = 192


def clean_code(text: str) -> str:
    """An LLM answer as plain code: markdown fences dropped, common indentation removed,
    trailing spaces, leading comment lines (a small model echoes the prompt's ``# error:``
    lines) and leading/trailing blank lines stripped. An answer of nothing but comments
    becomes empty, which the sandbox rejects, rather than a program that does nothing."""
    lines = [line.rstrip() for line in text.splitlines() if not _FENCE.match(line)]
    lines = textwrap.dedent("\n".join(lines)).splitlines()
    while lines and (not lines[0].strip() or lines[0].lstrip().startswith("#")):
        lines.pop(0)
    return "\n".join(lines).strip("\n")


def undefined_calls(source: str, provided: Iterable[str] = ()) -> list[str]:
    """Names called in ``source`` that nothing defines, in order of first call.

    [] for code that does not parse (the sandbox reports the syntax error).
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    known = _bound_names(tree) | SANDBOX_NAMES | set(SKILLS) | FORBIDDEN_NAMES | set(provided)
    found: list[str] = []
    for node in _in_order(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            name = node.func.id
            if name not in known and name not in found:
                found.append(name)
    return found


def undefined_names(source: str, provided: Iterable[str] = ()) -> list[str]:
    """Names read (not called) in ``source`` that nothing assigns or defines, in order of
    first use: ``put_first_on_second(block, 'green bowl')`` with no ``block = ...`` would stop
    at a NameError once the arm may already have moved. [] for code that does not parse."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    called = {
        id(node.func)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    }
    known = _bound_names(tree) | SANDBOX_NAMES | set(SKILLS) | FORBIDDEN_NAMES | set(provided)
    found: list[str] = []
    for node in _in_order(tree):
        if (
            isinstance(node, ast.Name)
            and isinstance(node.ctx, ast.Load)
            and id(node) not in called
            and node.id not in known
            and node.id not in found
        ):
            found.append(node.id)
    return found


def call_site(source: str, name: str) -> str:
    """The first call of ``name`` as the function-writing prompt shows it: with the assignment
    it feeds (``bowl = matching_bowl(block)``) when there is one, on one line."""
    tree = ast.parse(source)
    for node in _in_order(tree):
        if isinstance(node, ast.Assign | ast.AnnAssign) and calls(node.value, name):
            return _one_line(ast.unparse(node))
        if calls(node, name):
            return _one_line(ast.unparse(node))
    return f"{name}()"


def parameter_names(source: str, name: str) -> list[str]:
    """Parameter names for ``name`` from its first call: a variable passed keeps its name
    (``matching_bowl(block)`` -> ``block``), a keyword its keyword, anything else ``argN``."""
    tree = ast.parse(source)
    call = next((n for n in _in_order(tree) if calls(n, name)), None)
    if call is None:
        return []
    names: list[str] = []
    for index, arg in enumerate(call.args, start=1):
        if isinstance(arg, ast.Starred):
            candidate = "args"
        elif isinstance(arg, ast.Name):
            candidate = arg.id
        elif isinstance(arg, ast.Attribute):
            candidate = arg.attr
        else:
            candidate = f"arg{index}"
        names.append(candidate if candidate not in names else f"arg{index}")
    for keyword in call.keywords:
        if keyword.arg is None:
            names.append("**kwargs")
        elif keyword.arg not in names:
            names.append(f"{keyword.arg}=None")
    return names


def literal_queries(source: str, name: str) -> list[str]:
    """The literal string first arguments of every ``name(...)`` call, in order, unique."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    queries: list[str] = []
    for node in _in_order(tree):
        if calls(node, name) and node.args:
            first = node.args[0]
            text = first.value if isinstance(first, ast.Constant) else None
            if isinstance(text, str) and text not in queries:
                queries.append(text)
    return queries


def prompt_library(function_prompt: str) -> dict[str, str]:
    """The helpers a function-writing prompt defines as examples (name -> source): its
    ``def`` blocks, less the skill API's stubs that its header shows."""
    known = SANDBOX_NAMES | set(SKILLS) | FORBIDDEN_NAMES
    return {n: c for n, c in function_definitions(function_prompt).items() if n not in known}


def function_definitions(text: str) -> dict[str, str]:
    """The top-level ``def`` blocks of an answer, name -> source (other statements dropped).

    An answer whose end does not parse (cut off mid-statement) is read up to its last line that
    leaves valid code."""
    tree = _parse_longest_prefix(clean_code(text))
    if tree is None:
        return {}
    return {node.name: ast.unparse(node) for node in tree.body if isinstance(node, ast.FunctionDef)}


def parser_function(name: str, bodies: dict[str, str | None]) -> str:
    """A function that runs the sub-prompt's code for each description it was planned for.

    ``bodies`` maps each description to the code that sets ``ret_val`` (None when the
    sub-prompt gave no usable code)."""
    lines = [f"def {name}(description, *context):"]
    keyword = "if"
    for query, body in bodies.items():
        lines.append(f"    {keyword} description == {query!r}:")
        keyword = "elif"
        if body is None:
            message = f"{name} could not work out {query!r} (the generated code was not valid)"
            lines.append(f"        raise ValueError({message!r})")
        else:
            lines.append(textwrap.indent(body, " " * 8))
            lines.append("        return ret_val")
    message = (
        f"{name}: only descriptions written as literal strings in the program can be resolved "
        f"(planned for {list(bodies)}); got "
    )
    lines.append(f"    raise ValueError({message!r} + repr(description))")
    return "\n".join(lines)


@dataclass
class GeneratedFunctions:
    """What the hierarchical pass produced for one program."""

    functions: dict[str, str] = field(default_factory=dict)
    unresolved: list[str] = field(default_factory=list)  # still undefined at the depth limit


class FunctionGenerator:
    """Fills in the undefined functions of a program with the function-writing prompt and the
    parsing sub-prompts, level by level up to ``max_depth`` levels below the main code.
    ``grammars`` (``code_grammar.code_grammars`` of the scene): decode function bodies and
    parsing code under them. ``library``: helpers already written (name -> source), used as
    they are when the program calls one with arguments it accepts, without an LLM call: Code
    as Policies keeps the functions it has generated for reuse, and the helpers the
    function-writing prompt shows are what the model copies at temperature 0 anyway."""

    def __init__(
        self,
        ask: Ask,
        function_prompt: str,
        parsers: dict[str, str],
        max_depth: int,
        grammars: CodeGrammars | None = None,
        library: dict[str, str] | None = None,
        parser_prompt: Callable[[str, str], str] | None = None,
    ) -> None:
        self.ask, self.function_prompt = ask, function_prompt
        self.parsers, self.max_depth = parsers, max_depth
        self.grammars = grammars
        self.library = dict(library or {})
        # (parser name, description) -> that parser's prompt with its examples in the order
        # to show them (the planner's retriever: the most similar last); None: as written.
        self.parser_prompt = parser_prompt

    def _ask(self, prompt: str, stop: tuple[str, ...], max_tokens: int, grammar: str) -> str:
        """A lenient call, under ``grammar`` when the generator has grammars."""
        if self.grammars is None:
            return self.ask(prompt, stop, max_tokens, True)
        return self.ask(prompt, stop, max_tokens, True, grammar=grammar)

    def generate(self, main: str, objects: list[str]) -> GeneratedFunctions:
        result = GeneratedFunctions()
        parsed: dict[str, dict[str, str | None]] = {}
        failed: set[str] = set()
        for _level in range(self.max_depth):
            source = _joined(result.functions, main)
            pending = [n for n in undefined_calls(source, self.parsers) if n not in failed]
            parse_work = self._new_queries(source, parsed)
            if not pending and not parse_work:
                break
            for name in pending:
                if accepts_call(self.library.get(name), source, name):
                    result.functions[name] = self.library[name]
                    continue
                written = self._write_function(name, call_site(source, name), source)
                if name not in written:
                    failed.add(name)
                    continue
                result.functions[name] = written.pop(name)
                # Other functions in the answer are kept only when the program calls them.
                needed = undefined_calls(_joined(result.functions, main), self.parsers)
                for extra, code in written.items():
                    if extra in needed:
                        result.functions[extra] = code
            for name, queries in parse_work.items():
                bodies = parsed.setdefault(name, {})
                for query in queries:
                    bodies[query] = self._parse(name, query, objects)
                result.functions[name] = parser_function(name, bodies)
        source = _joined(result.functions, main)
        result.unresolved = undefined_calls(source, self.parsers)
        result.unresolved += list(self._new_queries(source, parsed))
        return result

    def _new_queries(
        self, source: str, parsed: dict[str, dict[str, str | None]]
    ) -> dict[str, list[str]]:
        work = {}
        for name in self.parsers:
            done = parsed.get(name, {})
            called = name in _called_names(source)
            queries = [q for q in literal_queries(source, name) if q not in done]
            if queries or (called and name not in parsed):
                work[name] = queries
        return work

    def _write_function(self, name: str, site: str, source: str) -> dict[str, str]:
        # The answer is begun with the def line taken from the call: a small model otherwise
        # renames the function or invents parameters. The call site is LLM-written code (its
        # literals may hold object names): quoted.
        start = f"def {name}({', '.join(parameter_names(source, name))}):\n"
        prompt = (
            f"{self.function_prompt.rstrip()}\n\n# define function: {prompt_quote(site)}.\n{start}"
        )
        grammar = self.grammars.function if self.grammars else ""
        answer = self._ask(prompt, FUNCTION_STOP, FUNCTION_MAX_TOKENS, grammar)
        return function_definitions(start + answer)

    def _parse(self, name: str, query: str, objects: list[str]) -> str | None:
        # The description is a string literal of LLM-written code: quoted, so a line break in
        # it cannot end the comment line of the sub-prompt.
        description = prompt_quote(query.rstrip("."))
        text = self.parser_prompt(name, query) if self.parser_prompt else self.parsers[name]
        prompt = f"{text.rstrip()}\n{objects_line(objects)}\n# {description}.\n"
        grammar = self.grammars.program if self.grammars else ""
        body = clean_code(self._ask(prompt, PARSE_STOP, PARSE_MAX_TOKENS, grammar))
        try:
            tree = ast.parse(body)
        except SyntaxError:
            return None
        assigns = {
            target.id
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign)
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        return body if "ret_val" in assigns else None


def join_program(functions: dict[str, str], main: str) -> str:
    """The program the sandbox runs: the generated functions first, then the main code."""
    return _joined(functions, main)


def _joined(functions: dict[str, str], main: str) -> str:
    parts = [*functions.values(), main]
    return "\n\n".join(part.strip("\n") for part in parts if part.strip()) + "\n"


def _parse_longest_prefix(text: str) -> ast.Module | None:
    lines = text.splitlines()
    for end in range(len(lines), 0, -1):
        try:
            return ast.parse("\n".join(lines[:end]))
        except SyntaxError:
            continue
    return None


def _bound_names(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
    return names


def _called_names(source: str) -> set[str]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    return {
        node.func.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    }


def _in_order(tree: ast.AST) -> list[ast.AST]:
    """Every node, sorted by position in the source (ast.walk is breadth-first)."""
    nodes = [n for n in ast.walk(tree) if hasattr(n, "lineno")]
    # ast.AST declares no position; every node kept has one (hasattr above)
    return sorted(nodes, key=lambda n: (n.lineno, n.col_offset))  # type: ignore[attr-defined]


def _one_line(text: str) -> str:
    return " ".join(text.split())
