"""GBNF grammars (llama.cpp's format) for policy code, built from the skill catalog and the scene
(Grounded Decoding, Huang et al.): a small local model decoding under them can only write
programs that parse, call real skills with the right arity and name only objects that are there.

The language is the Python subset the Code-as-Policies prompts use (``config/prompts/cap``):
assignments, calls, ``for`` loops, ``if``/``elif``/``else``, list literals and comprehensions,
``lambda``, subscripts, attribute calls (``np.array``, ``name.endswith``), arithmetic and
comparisons, ``def`` with ``return`` for helper functions, nested up to ``MAX_DEPTH`` blocks.
Everything is written the canonical way (four-space indents, ``a = b``, ``f(a, b)``), single-
quoted strings:

- a skill call takes its catalog parameters: positional first, then ``name=value`` keywords
  in catalog order, every required one given (``_skill_rule``);
- an argument of an ``object``/``place`` parameter is an object present (``'red block'``) or a
  value that is not a string literal (a variable, a call, a position); a parameter with
  ``choices`` (``get_corner_pos``'s corners) takes one of them or such a value;
- free text (``'...'``, simple f-strings) only where the catalog says any string will do
  (``say``'s text, ``is_obj_visible``) and as the description of a parsing helper
  (``parse_obj_name``); anywhere else a string literal is an object present, a catalog choice
  or an object kind (``'block'``: ``name.endswith('block')``, ``block.replace('block', 'bowl')``);
- any other call is a helper function, named by an identifier that is no skill, keyword or
  name the sandbox forbids (``identifier_rules``): the function generator writes it.

``program_grammar`` is for the main code (and the parsing sub-prompts); it ends with ``#``, the
start of the prompt's next comment, which the stop sequence ``"\\n#"`` cuts off.
``function_grammar`` is for the body that follows a ``def`` line the planner wrote. The same
rules, checked on any program after the fact, are ``code_grammar_check.check_program``.
"""

from __future__ import annotations

import keyword
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from lang2policy.l2r.grammar import gbnf_literal
from lang2policy.planning.code_grammar_check import OBJECT_KINDS, check_program
from lang2policy.sandbox.ast_check import FORBIDDEN_NAMES
from lang2policy.skills.catalog import SKILLS
from lang2policy.skills.spec import Param, Skill

__all__ = [
    "CodeGrammars",
    "check_program",
    "code_grammars",
    "function_grammar",
    "identifier_rules",
    "program_grammar",
]

MAX_DEPTH = 4  # nested blocks (a def body is one); deeper statements are simple ones only
# The keys of get_ee_pose's dict: words a program may write as string literals besides object
# names, object kinds and catalog choices.
POSE_KEYS = ("position", "quaternion")
RESERVED = frozenset(keyword.kwlist) | frozenset(SKILLS) | FORBIDDEN_NAMES
_FIRST = "abcdefghijklmnopqrstuvwxyz_"
_CHARS = _FIRST + "0123456789"
_EXPRESSIONS = r"""
expr ::= disj (" if " disj " else " disj)?
nexpr ::= nunary (binop unary)* (" if " disj " else " disj)?
disj ::= unary (binop unary)*
unary ::= ("not " | "-")? primary
nunary ::= ("not " | "-")? nprimary
primary ::= (natom | str) trailer*
nprimary ::= natom trailer*
natom ::= num | "True" | "False" | "None" | skill | named | list | paren | lambda
named ::= ident ("(" args? ")")?
args ::= arg (", " arg)*
arg ::= (ident "=")? expr | "*" nexpr
trailer ::= "[" slice "]" | "." ident ("(" args? ")")?
slice ::= expr (":" expr?)? | ":" expr?
list ::= "[" (expr ((", " expr)* | " for " targets " in " disj (" if " disj)?))? "]"
paren ::= "(" expr (", " expr)* ")"
lambda ::= "lambda " targets ": " expr
targets ::= ident (", " ident)*
binop ::= " " (arith | compare | "and" | "or") " "
arith ::= "+" | "-" | "*" | "/" | "//" | "%" | "**"
compare ::= "==" | "!=" | "<" | ">" | "<=" | ">=" | "in" | "not in" | "is" | "is not"
num ::= [0-9]+ ("." [0-9]+)?
oarg ::= obj | nexpr
targ ::= text | fstr | nexpr
text ::= "'" [^'\\\n]* "'"
fstr ::= "f'" ([^'\\\n{}] | "{" fexpr "}")* "'"
fexpr ::= "\", \".join(" fref ")" | fref
fref ::= (fskill | ident ("(" (fref (", " fref)*)? ")")?) ("." ident ("(" ")")?)* ("[" [0-9]+ "]")*
assign ::= targets " = " expr | ident ("[" slice "]")+ " = " expr | ident " " [-+*/] "= " expr
"""


@dataclass(frozen=True)
class CodeGrammars:
    """The grammars of one scene: ``program`` (main code, parsing sub-prompts) and
    ``function`` (a helper's body after its ``def`` line)."""

    program: str
    function: str


@lru_cache(maxsize=64)
def _cached(objects: tuple[str, ...], free_text_calls: tuple[str, ...]) -> CodeGrammars:
    shared = _shared_rules(objects, free_text_calls)
    program = ['root ::= top ("\\n"? top)* "#"', "top ::= s0-0 | def"]
    function = ['root ::= b1-1 ("\\n"? def)* "\\n"? "#"']
    return CodeGrammars("\n".join(program + shared), "\n".join(function + shared))


def code_grammars(objects: Sequence[str], free_text_calls: Iterable[str] = ()) -> CodeGrammars:
    """Both grammars for a scene with ``objects``; ``free_text_calls`` are the parsing helpers
    whose first argument is a description in words (``PromptSet.parsers``)."""
    return _cached(tuple(dict.fromkeys(objects)), tuple(sorted(set(free_text_calls))))


def program_grammar(objects: Sequence[str], free_text_calls: Iterable[str] = ()) -> str:
    """GBNF for the main program (see the module docstring)."""
    return code_grammars(objects, free_text_calls).program


def function_grammar(objects: Sequence[str], free_text_calls: Iterable[str] = ()) -> str:
    """GBNF for a helper's body (and further helpers after it), after its ``def`` line."""
    return code_grammars(objects, free_text_calls).function


def _shared_rules(objects: tuple[str, ...], free_text_calls: tuple[str, ...]) -> list[str]:
    rules = [line for line in _EXPRESSIONS.strip().splitlines()]
    rules += _string_rules(objects)
    rules += _call_rules(free_text_calls)
    rules += _statement_rules()
    rules += identifier_rules("ident", RESERVED)
    return rules


def _alternation(texts: Iterable[str]) -> str:
    return "(" + " | ".join(gbnf_literal(t) for t in texts) + ")"


def _string_rules(objects: tuple[str, ...]) -> list[str]:
    """``obj``: the objects present; ``str``: any string literal outside free text."""
    choices = sorted({c for s in SKILLS.values() for p in s.params for c in p.choices or ()})
    kinds = sorted({*OBJECT_KINDS, *(o.split()[-1] for o in objects if o.split())})
    words = [repr(w) for w in dict.fromkeys([*choices, *kinds, *POSE_KEYS])]
    obj = _alternation(repr(o) for o in objects) if objects else "\"''\""
    return [f"obj ::= {obj}", f"str ::= obj | {_alternation(words)}"]


def _argument(param: Param) -> str:
    """The rule of one argument's value, from the parameter's kind."""
    if param.kind in ("object", "place"):
        return "oarg"
    if param.kind == "string" and param.choices:
        return f"({_alternation(repr(c) for c in param.choices)} | nexpr)"
    if param.kind == "string":
        return "targ"
    return "nexpr"


def _separated(items: list[tuple[str, bool]]) -> str:
    """``items`` (rule, optional) joined by ", ", each optional one present or not, in order."""
    alternatives = []
    for first, (rule, optional) in enumerate(items):
        rest = " ".join(f'(", " {r})?' if o else f'", " {r}' for r, o in items[first + 1 :])
        alternatives.append(f"{rule} {rest}".strip())
        if not optional:
            break
    else:
        alternatives.append("")
    shown = [f"({a})" for a in alternatives if a]
    body = " | ".join(shown)
    return f"({body})?" if "" in alternatives else f"({body})"


def _skill_rule(skill: Skill) -> str:
    """``name(``, the first k parameters positional (k = 0..n: a positional argument never
    skips one), then the others as keywords in catalog order (the required ones always), ``)``."""
    params = skill.params
    if not params:
        return gbnf_literal(f"{skill.name}()")
    forms = []
    for positional in range(len(params) + 1):
        items = [(_argument(p), False) for p in params[:positional]]
        items += [
            (f"{gbnf_literal(p.name + '=')} {_argument(p)}", not p.required)
            for p in params[positional:]
        ]
        forms.append(_separated(items))
    inner = " | ".join(dict.fromkeys(forms))
    return f'{gbnf_literal(skill.name + "(")} ({inner}) ")"'


def _call_rules(free_text_calls: tuple[str, ...]) -> list[str]:
    names = {name: f"sk-{name.replace('_', '-')}" for name in SKILLS}
    rules = [f"{names[n]} ::= {_skill_rule(s)}" for n, s in SKILLS.items()]
    calls = list(names.values())
    if free_text_calls:
        rules.append(f'ftcall ::= {_alternation(free_text_calls)} "(" text (", " arg)* ")"')
        calls.append("ftcall")
    rules.append("skill ::= " + " | ".join(calls))
    nullary = [
        f"{n}()"
        for n, s in SKILLS.items()
        if s.category == "query" and not any(p.required for p in s.params)
    ]
    rules.append(f"fskill ::= {_alternation(nullary)}")
    return rules


def _statement_rules() -> list[str]:
    """Statements at each depth, in a def body (``f`` 1) or not (0): ``s<f>-<depth>``."""
    rules = [
        'def ::= "def " ident "(" params? "):\\n" b1-1',
        'params ::= param (", " param)*',
        'param ::= ident ("=" nexpr)? | "*" ident | "**" ident',
    ]
    for f in (0, 1):
        simple = ["assign", "nprimary", '"pass"'] + (
            ['"return" (" " expr (", " expr)*)?'] if f else []
        )
        rules.append(f"simple-{f} ::= " + " | ".join(simple))
        for depth in range(MAX_DEPTH + 1):
            indent = f'"{"    " * depth}" ' if depth else ""
            name, body = f"s{f}-{depth}", f"b{f}-{depth + 1}"
            if depth == MAX_DEPTH:
                rules.append(f'{name} ::= {indent}simple-{f} "\\n"')
                continue
            head = f'{indent}"if " expr ":\\n" {body}'
            rules += [
                f'{name} ::= {indent}(simple-{f} "\\n" | "for " targets " in " expr ":\\n" '
                f"{body}) | if{f}-{depth}",
                f'if{f}-{depth} ::= {head} ({indent}"elif " expr ":\\n" {body})* '
                f'({indent}"else:\\n" {body})?',
                f"{body} ::= s{f}-{depth + 1}+",
            ]
    return rules


def identifier_rules(name: str, excluded: Iterable[str]) -> list[str]:
    """GBNF rules ``name`` for lower-case identifiers ([a-z_][a-z0-9_]*) other than the words
    of ``excluded``: a trie of those words, where leaving the trie (a letter no excluded word
    continues with) admits any rest, and ending inside it is allowed unless on a whole word."""
    words = sorted({w for w in excluded if w and w[0] in _FIRST and set(w) <= set(_CHARS)})
    prefixes = sorted({w[:i] for w in words for i in range(len(w) + 1)})
    ids = {p: f"{name}-{i}" if p else name for i, p in enumerate(prefixes)}
    rules = [f"{name}-tail ::= [{_CHARS}]*"]
    for prefix in prefixes:
        nexts = sorted({w[len(prefix)] for w in words if w.startswith(prefix) and w != prefix})
        alternatives = [f'"{c}" {ids[prefix + c]}' for c in nexts]
        others = "".join(c for c in (_CHARS if prefix else _FIRST) if c not in nexts)
        if others:
            alternatives.append(f"[{others}] {name}-tail")
        body = " | ".join(alternatives) or '""'
        ends = prefix and prefix not in words
        rules.append(f"{ids[prefix]} ::= ({body})" + ("?" if ends else ""))
    return rules
