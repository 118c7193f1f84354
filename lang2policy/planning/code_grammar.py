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
  value that is not a string literal (a variable, a call, a position); the object a skill picks
  up (``pick``/``put_first_on_second``'s ``obj``) is a block; a parameter with
  ``choices`` (``get_corner_pos``'s corners) takes one of them or such a value;
- free text (``'...'``, simple f-strings) only where the catalog says any string will do
  (``say``'s text, ``is_obj_visible``) and as the description of a parsing helper
  (``parse_obj_name``); anywhere else a string literal is an object present, a catalog choice
  or an object kind (``'block'``: ``name.endswith('block')``, ``block.replace('block', 'bowl')``);
- any other call is a helper function, named by an identifier that is no skill: skills and
  helpers share one trie of names (``word_rules``), so a skill name gets only its own
  arguments; the function generator writes the helpers. Assigned names (``var``) are no
  keyword, skill or name the sandbox forbids.

``program_grammar`` is for the main code (and the parsing sub-prompts); it ends with ``#``, the
start of the prompt's next comment, which the stop sequence ``"\\n#"`` cuts off.
``function_grammar`` is for the body that follows a ``def`` line the planner wrote. The same
rules, checked on any program after the fact, are ``code_grammar_check.check_program``.
"""

from __future__ import annotations

import keyword
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from lang2policy.llm.gbnf import gbnf_literal
from lang2policy.planning.code_grammar_check import OBJECT_KINDS, check_program
from lang2policy.planning.instruction_focus import (
    asks_for_speed,
    instruction_words,
    kind_focus,
)
from lang2policy.sandbox.ast_check import FORBIDDEN_NAMES
from lang2policy.skills.catalog import PROMPT_SKILLS as SKILLS
from lang2policy.skills.catalog import SKILLS as WITH_VLA
from lang2policy.skills.spec import Param, Skill
from lang2policy.text_quote import prompt_quote

__all__ = [
    "CodeGrammars",
    "check_program",
    "code_grammars",
    "function_grammar",
    "program_grammar",
    "word_rules",
]

MAX_DEPTH = 4  # nested blocks (a def body is one); deeper statements are simple ones only
# The keys of get_ee_pose's dict: words a program may write as string literals besides object
# names, object kinds and catalog choices.
POSE_KEYS = ("position", "quaternion")
# (skill, parameter) of the object a skill picks up: a block (the skill backend refuses others).
GRASPING = frozenset({("pick", "obj"), ("put_first_on_second", "obj")})
# Words of an instruction that let a focused main program aim at a place a function finds
# (``_object_argument_rules``): "in the top left corner" -> ``get_corner_pos``; "5 cm left of
# the blue bowl" -> ``parse_position``; "the bowl closest to the red block" -> ``parse_obj_name``.
# fmt: off
_SPATIAL = (
    "left", "right", "between", "next", "beside", "behind", "front", "above", "below", "near",
    "middle", "center", "centre", "top", "bottom", "around", "away", "closer", "farther", "cm",
    "side", "edge", "point", "position", "spot",
)
_REFERRING = (
    "closest", "nearest", "farthest", "furthest", "near", "next", "beside", "left", "right",
    "between", "most", "other", "same", "matching", "match", "biggest", "smallest", "first",
    "last", "top", "bottom", "behind", "front", "corner", "middle",
)
# fmt: on
FINDER_WORDS = {
    "get_corner_pos": ("corner", "corners"),
    "parse_position": _SPATIAL,
    "parse_obj_name": _REFERRING,
}
# ``vla_skill`` is offered (and reserved) only where a VLA runs (``code_grammars(vla=True)``).
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
natom ::= num | "True" | "False" | "None" | name | list | paren | lambda
ident ::= [a-z_] [a-z0-9_]*
call ::= "(" args? ")"
args ::= arg (", " arg)*
arg ::= (ident "=")? expr | "*" nexpr
trailer ::= "[" slice "]" | "." ident ("(" args? ")")?
slice ::= expr (":" expr?)? | ":" expr?
list ::= "[" (expr ((", " expr)* | " for " targets " in " disj (" if " disj)?))? "]"
paren ::= "(" expr (", " expr)* ")"
lambda ::= "lambda " targets ": " expr
targets ::= var (", " var)*
binop ::= " " (arith | compare | "and" | "or") " "
arith ::= "+" | "-" | "*" | "/" | "//" | "%" | "**"
compare ::= "==" | "!=" | "<" | ">" | "<=" | ">=" | "in" | "not in" | "is" | "is not"
num ::= [0-9]+ ("." [0-9]+)?
targ ::= text | fstr | nexpr
text ::= "'" [^'\\\n]* "'"
fstr ::= "f'" ([^'\\\n{}] | "{" fexpr "}")* "'"
fexpr ::= "\", \".join(" fref ")" | fref
fref ::= fhead ("." ident ("(" ")")?)* ("[" [0-9]+ "]")*
fhead ::= sk-nullary | ident ("(" (fref (", " fref)*)? ")")?
assign ::= targets " = " expr | var ("[" slice "]")+ " = " expr | var " " [-+*/] "= " expr
"""


_SPEED_RULE = 'speed ::= "0." [0-9] [0-9]? [0-9]?'
_DEFAULT_SPEED = 'speed ::= "0.15"'
# An instruction that names at least this many objects present has its main code's object
# literals restricted to them (``code_grammars``' ``focus``).
FOCUS_MIN = 2


@dataclass(frozen=True)
class CodeGrammars:
    """The grammars of one scene: ``program`` (parsing sub-prompts, any object present),
    ``function`` (a helper's body after its ``def`` line) and ``main`` (the main code: the
    program grammar, with its object literals restricted to the instruction's objects when it
    names ``FOCUS_MIN`` or more)."""

    program: str
    function: str
    main: str


_PROGRAM_ROOT = ['root ::= top ("\\n"? top)* "#"', "top ::= s0-0 | def"]


@lru_cache(maxsize=64)
def _cached(
    objects: tuple[str, ...],
    free_text_calls: tuple[str, ...],
    focus: tuple[str, ...],
    finders: tuple[str, ...],
    literals: tuple[str, ...],
    speeds: bool,
    vla: bool = False,
) -> CodeGrammars:
    skills = WITH_VLA if vla else SKILLS
    shared = _shared_rules(objects, free_text_calls, skills=skills)
    function = ['root ::= b1-1 ("\\n"? def)* "\\n"? "#"']
    program = "\n".join(_PROGRAM_ROOT + shared)
    if len(focus) >= FOCUS_MIN:
        main_rules = _shared_rules(focus, free_text_calls, finders=finders, skills=skills)
    else:
        main_rules = _shared_rules(literals, free_text_calls, skills=skills)
    if not speeds:  # the person said nothing of speed: a speed argument is the default
        main_rules = [_DEFAULT_SPEED if r.startswith("speed ::=") else r for r in main_rules]
    return CodeGrammars(
        program, "\n".join(function + shared), "\n".join(_PROGRAM_ROOT + main_rules)
    )


def code_grammars(
    objects: Sequence[str],
    free_text_calls: Iterable[str] = (),
    focus: Sequence[str] = (),
    instruction: str = "",
    vla: bool = False,
) -> CodeGrammars:
    """The grammars for a scene with ``objects``; ``free_text_calls`` are the parsing helpers
    whose first argument is a description in words (``PromptSet.parsers``); ``focus``: the
    objects present that the instruction names (``scoring.instruction_objects``); ``vla``:
    ``vla_skill`` is a skill too (a VLA runs in the graph).

    Why the focus: a 270M model asked to "drop the red block into the yellow bowl" often
    copies the colours of its nearest few-shot example when they are on the table too. When
    the person names the block and the bowl, the main code names only those (helpers and the
    parsing helpers' answers still range over every object: "the block closest to the blue
    bowl" is found by ``parse_obj_name``, which the instruction does not name)."""
    present = tuple(dict.fromkeys(objects))
    named = tuple(o for o in dict.fromkeys(focus) if o in present)
    words = instruction_words(instruction)
    finders = tuple(n for n, asked in FINDER_WORDS.items() if words & set(asked))
    literals = kind_focus(present, named, instruction)
    free = tuple(sorted(set(free_text_calls)))
    speeds = asks_for_speed(instruction)
    return _cached(present, free, named, finders, literals, speeds, vla)


def program_grammar(objects: Sequence[str], free_text_calls: Iterable[str] = ()) -> str:
    """GBNF for the main program (see the module docstring)."""
    return code_grammars(objects, free_text_calls).program


def function_grammar(objects: Sequence[str], free_text_calls: Iterable[str] = ()) -> str:
    """GBNF for a helper's body (and further helpers after it), after its ``def`` line."""
    return code_grammars(objects, free_text_calls).function


def _shared_rules(
    objects: tuple[str, ...],
    free_text_calls: tuple[str, ...],
    finders: tuple[str, ...] | None = None,
    skills: Mapping[str, Skill] = SKILLS,
) -> list[str]:
    """The rules both grammars share; ``finders`` (a tuple, maybe empty) makes them the
    focused main program's (``_object_argument_rules``); ``skills``: the skills offered."""
    rules = [*_EXPRESSIONS.strip().splitlines(), _SPEED_RULE]
    rules += _string_rules(objects)
    rules += _object_argument_rules(objects, free_text_calls, finders)
    calls = _call_rules(free_text_calls, skills)
    rules += [f"{n} ::= {body}" for n, body in calls.items() if n.startswith("sk-")]
    rules += _statement_rules()
    rules += word_rules("var", RESERVED | frozenset(skills))
    rules += word_rules("name", (), {k: v for k, v in calls.items() if not k.startswith("sk-")})
    return rules


def _alternation(texts: Iterable[str]) -> str:
    return "(" + " | ".join(gbnf_literal(t) for t in texts) + ")"


def _literal(text: str) -> str:  # as the prompts write it (repr, for ordinary names)
    return prompt_quote(text, literal=True)


def _string_rules(objects: tuple[str, ...]) -> list[str]:
    """``obj``: the objects present; ``str``: any string literal outside free text."""
    choices = sorted({c for s in SKILLS.values() for p in s.params for c in p.choices or ()})
    kinds = sorted({*OBJECT_KINDS, *(o.split()[-1] for o in objects if o.split())})
    words = [_literal(w) for w in dict.fromkeys([*choices, *kinds, *POSE_KEYS])]
    obj = _alternation(_literal(o) for o in objects) if objects else "\"''\""
    return [f"obj ::= {obj}", f"str ::= obj | {_alternation(words)}"]


def _object_argument_rules(
    objects: tuple[str, ...], free_text_calls: tuple[str, ...], finders: tuple[str, ...] | None
) -> list[str]:
    """``oarg``: an object or place argument; ``goarg``: the object a skill grasps (a block:
    the robot picks up nothing else). Either is an object named as a literal or a value. In
    a focused main program (``finders`` given: the instruction names its objects) the grasped
    object is one of them and a target is one of them or a place a parsing helper finds
    (``parse_position('...')``), or a skill of ``finders`` (``get_corner_pos`` when the
    instruction speaks of a corner): never a variable, a literal position or a corner the
    person did not ask for, which a small model copies from its examples
    (``np.array([0.21, 0.06, 0.01])`` of a "put it back", the corner of a corner task)."""
    blocks = tuple(o for o in objects if o.split()[-1:] == ["block"])
    grasped = _alternation(_literal(o) for o in blocks) if blocks else "obj"
    rules = [f"gobj ::= {grasped}"]
    if finders is None:
        return [*rules, "oarg ::= obj | nexpr", "goarg ::= gobj | nexpr"]
    parsers = [n for n in free_text_calls if n not in FINDER_WORDS or n in finders]
    places = [f'"{n}(" (text | expr) (", " arg)* ")"' for n in parsers]
    places += [f'"{n}" sk-{n.replace("_", "-")}' for n in finders if n in SKILLS]
    if not places:
        return [*rules, "oarg ::= obj", "goarg ::= gobj"]
    return [*rules, f"fplace ::= {' | '.join(places)}", "oarg ::= obj | fplace", "goarg ::= gobj"]


def _argument(param: Param, skill: str = "") -> str:
    """The rule of one argument's value, from the parameter's kind (and, for the object a
    skill grasps, from the skill: ``GRASPING``)."""
    if (skill, param.name) in GRASPING:
        return "goarg"
    if param.kind in ("object", "place"):
        return "oarg"
    if param.kind == "string" and param.choices:
        return f"({_alternation(repr(c) for c in param.choices)} | nexpr)"
    if param.kind == "string":
        return "targ"
    if param.kind == "number" and param.name == "speed":
        return "speed"  # a literal below 1 m/s: a small model otherwise passes a name or 1
    return "nexpr"


def _keywords(params: Sequence[Param], skill: str) -> tuple[str, bool]:
    """(GBNF, may be empty) for ``params`` as ``name=value`` keywords in catalog order, the
    required ones always, joined by ", "; the GBNF itself admits at least one."""
    items = [
        (f"{gbnf_literal(p.name + '=')} {_argument(p, skill)}", not p.required) for p in params
    ]
    alternatives = []
    for first, (rule, optional) in enumerate(items):
        rest = " ".join(f'(", " {r})?' if o else f'", " {r}' for r, o in items[first + 1 :])
        alternatives.append("(" + " ".join(filter(None, [rule, rest])) + ")")
        if not optional:
            return "(" + " | ".join(alternatives) + ")", False
    return "(" + " | ".join(alternatives) + ")", True


def _arguments(params: Sequence[Param], skill: str) -> tuple[str, bool]:
    """(GBNF, may be empty) for the arguments of ``params`` from the first on: it positional
    and then the rest the same way, or all of them as keywords (``_keywords``). Left-factored:
    llama.cpp keeps one stack per open alternative, so the forms share their common start."""
    keywords, empty = _keywords(params, skill)
    rest, rest_empty = _arguments(params[1:], skill) if len(params) > 1 else ("", True)
    positional = _argument(params[0], skill)
    if rest:
        positional += f' (", " {rest})' + ("?" if rest_empty else "")
    return f"({positional} | {keywords})", empty


def _skill_rule(skill: Skill) -> str:
    """``(``, the first k parameters positional (a positional argument never skips one), then
    the others as keywords in catalog order (the required ones always), ``)``."""
    if not skill.params:
        return '"()"'
    inner, empty = _arguments(skill.params, skill.name)
    return f'"(" {inner}{"?" if empty else ""} ")"'


def _call_rules(
    free_text_calls: tuple[str, ...], skills: Mapping[str, Skill] = SKILLS
) -> dict[str, str]:
    """``sk-<skill>`` rules (a skill's argument list, parentheses included) and, by function
    name, what follows the name of each skill and free-text call."""
    rules = {f"sk-{n.replace('_', '-')}": _skill_rule(s) for n, s in skills.items()}
    follow = {n: f"sk-{n.replace('_', '-')}" for n in skills}
    follow.update({n: '"(" (text | expr) (", " arg)* ")"' for n in free_text_calls})
    nullary = [
        f"{n}()"
        for n, s in skills.items()
        if s.category == "query" and not any(p.required for p in s.params)
    ]
    rules["sk-nullary"] = _alternation(nullary)  # fskill: what an f-string may call
    return {**rules, **follow}


def _statement_rules() -> list[str]:
    """Statements at each depth, in a def body (``f`` 1) or not (0): ``s<f>-<depth>``."""
    rules = [
        'def ::= "def " var "(" params? "):\\n" b1-1',
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


def word_rules(
    name: str, excluded: Iterable[str], calls: Mapping[str, str] | None = None
) -> list[str]:
    """GBNF rules ``name`` for lower-case identifiers ([a-z_][a-z0-9_]*) other than the words
    of ``excluded``, each followed by its argument list when it is a key of ``calls`` (which
    rule follows it) and by an optional ``call`` (a helper's arguments) when not.

    One trie of the words: leaving it (a letter no word continues with) admits any rest, and
    ending inside it is allowed unless on an excluded word. A call name reached through the
    trie gets only its own arguments, so a skill cannot be called as if it were a helper.
    llama.cpp tries every alternative as a stack against each token of the vocabulary, so the
    names share one trie rather than one alternative each (a skill's ``"put_first_on_second("``
    literal next to an identifier rule costs twice)."""
    calls = dict(calls or {})
    after = " call?" if calls else ""  # a plain identifier, or any helper's call
    words = sorted(
        {w for w in [*excluded, *calls] if w and w[0] in _FIRST and set(w) <= set(_CHARS)}
    )
    prefixes = sorted({w[:i] for w in words for i in range(len(w) + 1)})
    ids = {p: f"{name}-{i}" if p else name for i, p in enumerate(prefixes)}
    rules = [f"{name}-tail ::= [{_CHARS}]*{after}"]
    for prefix in prefixes:
        nexts = sorted({w[len(prefix)] for w in words if w.startswith(prefix) and w != prefix})
        alternatives = [f'"{c}" {ids[prefix + c]}' for c in nexts]
        others = "".join(c for c in (_CHARS if prefix else _FIRST) if c not in nexts)
        alternatives.append(f"[{others}] {name}-tail")
        body = " | ".join(alternatives)
        if prefix in calls:
            body += " | " + calls[prefix]
        elif prefix and prefix not in words:  # a whole identifier: it may end here
            body = f"{body} | call?" if calls else f"({body})?"
        rules.append(f"{ids[prefix]} ::= {body}")
    return rules
