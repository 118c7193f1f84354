"""GBNF grammars (llama.cpp's format) that keep a small local model's answers valid.

``description_grammar`` admits only filled descriptions: the "new task" line, the object line,
at least one optional line (template order, each at most once), then ``[end of description]``.
It also encodes what a description must be consistent with:

- object lines ("The object should ...") follow only a real object, never "none", and an
  object is never placed on itself;
- object choices are the objects the instruction names and the object of the previous
  description; "none" (no object: the task is about the gripper) when there is neither, or
  when the instruction speaks of the gripper;
- in a new task, number slots take a value the instruction states for their kind (lengths
  in metres, x/y/z coordinates and the positions of the objects it names, speeds, angles,
  seconds; ``ground_numbers``) when it states any; otherwise, and in corrections ("higher"),
  any number of a fixed shape.

``code_grammar`` admits reward-API calls only (names from the API, objects from the scene,
never an object placed on itself), ``reset_reward()`` first exactly when the task is new and
``execute_plan()`` last.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from itertools import permutations

from lang2policy.instruction_text import COLOURS
from lang2policy.l2r.api import REWARD_API
from lang2policy.l2r.template import END, TEMPLATE, Choice, Line, Num, Part
from lang2policy.llm.gbnf import gbnf_literal

CODE_END = "[end of code]"
MAX_CALLS = 8
NUMBER_RULES = (
    'unum ::= [0-9] [0-9]? [0-9]? ("." [0-9] [0-9]? [0-9]?)?\n'
    'snum ::= "-"? unum'
)
_FIXED = ("reset_reward", "execute_plan")
_NUMBER = r"(-?\d+(?:\.\d+)?)"
_UNIT_PATTERNS = (  # (kind, pattern, scale of each unit); speeds before lengths
    ("speed", _NUMBER + r"\s*(cm|mm|m)\s*/\s*s\b", {"cm": 0.01, "mm": 0.001, "m": 1.0}),
    ("length", _NUMBER + r"\s*(cm|mm|m|centimet(?:er|re)s?|millimet(?:er|re)s?|met(?:er|re)s?)\b"
     r"(?!\s*/)", {"c": 0.01, "mi": 0.001, "m": 1.0}),
    ("angle", _NUMBER + r"\s*(°|deg\w*)", {"": 1.0}),
    ("time", _NUMBER + r"\s*(s|secs?|seconds?)\b", {"": 1.0}),
)
_AXIS = re.compile(r"\b([xyz])\s*[=:]?\s*" + _NUMBER + r"(\s*m\b(?!\s*/))?", re.IGNORECASE)
_SPEED_WORDS = ((r"\b(slow\w*|gentl\w*|careful\w*)\b", 0.05), (r"\b(quick\w*|fast\w*)\b", 0.2))
_SPEED_MODES = (  # the speed line's choice, from the words of a new instruction
    (r"\b(slow\w*|gentl\w*|careful\w*|under|below|at most|no faster|no more than)\b",
     "no faster than"),
    (r"\b(quick\w*|fast|faster than|at least|hurry|rapid\w*)\b", "at least"),
)


def _alternatives(items: Sequence[str]) -> str:
    return "(" + " | ".join(items) + ")"


def number_text(value: float) -> str:
    """A number as descriptions and code write it: 0.1, 45.0, -0.12."""
    return repr(round(float(value), 4))


# ---------------------------------------------------------------- grounding
_GRIPPER_WORDS = re.compile(r"\b(gripper|hand|tool|end[- ]effector|arm|fingers?)\b", re.I)


def mentioned(instruction: str, objects: Sequence[str]) -> list[str]:
    """The scene objects the instruction names, in scene order; "the block" names the only
    block of the scene."""
    text = " ".join(instruction.lower().split())
    named = [o for o in objects if re.search(rf"\b{re.escape(o.lower())}\b", text)]
    if named:
        return named
    kinds = {o.split()[-1].lower() for o in objects if o.split()}
    for kind in kinds:
        of_kind = [o for o in objects if o.split() and o.split()[-1].lower() == kind]
        if len(of_kind) == 1 and re.search(rf"\b{re.escape(kind)}\b", text):
            named.append(of_kind[0])
    return [o for o in objects if o in named]




def missing_objects(instruction: str, objects: Sequence[str]) -> list[str]:
    """Objects the instruction names ("<colour> <kind>", kinds from the scene's names) that
    are not in the scene."""
    kinds = {o.split()[-1].lower() for o in objects if o.split()}
    colours = set(COLOURS) | {o.split()[0].lower() for o in objects if len(o.split()) > 1}
    present = {o.lower() for o in objects}
    found = re.findall(r"\b([a-z]+)(?= ([a-z]+?)s?\b)", " ".join(instruction.lower().split()))
    named = [f"{c} {k}" for c, k in found if c in colours and k in kinds]
    return [n for n in dict.fromkeys(named) if n not in present]


def about_gripper(instruction: str) -> bool:
    """Whether the instruction is about the gripper itself ("keep the gripper above ...")."""
    return bool(_GRIPPER_WORDS.search(instruction))


def _scale(units: dict[str, float], unit: str) -> float:
    unit = unit.lower()
    return next((s for prefix, s in sorted(units.items(), key=lambda u: -len(u[0]))
                 if unit.startswith(prefix)), 1.0)


def ground_numbers(instruction: str, focus: Sequence[str] = (),
                   positions: Mapping[str, Sequence[float]] | None = None
                   ) -> dict[str, list]:
    """The values an instruction states, by kind: "length" (m), "speed" (m/s), "angle" (deg),
    "time" (s) and "x"/"y"/"z" (m: numbers after an axis letter, other plain numbers for
    every axis; if there are none, the positions of the ``focus`` objects). Speed words count
    too: "slowly"
    is 0.05 m/s, "quickly" 0.2 m/s (the descriptor's rule 7), and they set "speed_mode", the
    choice of the speed line ("no faster than" or "at least")."""
    found: dict[str, list] = {k: [] for k in ("length", "speed", "angle", "time",
                                                     "x", "y", "z")}
    text = instruction
    for match in _AXIS.finditer(text):  # "x=0.23 m", "y -0.1": before units
        found[match.group(1).lower()].append(float(match.group(2)))
    text = _AXIS.sub(" ", text)
    for kind, pattern, units in _UNIT_PATTERNS:
        for match in re.finditer(pattern, text, re.IGNORECASE):
            found[kind].append(round(float(match.group(1)) * _scale(units, match.group(2)), 4))
        text = re.sub(pattern, " ", text, flags=re.IGNORECASE)
    for match in re.finditer(r"(?<![\w.])" + _NUMBER + r"(?![\w.])", text):
        for axis in "xyz":
            found[axis].append(float(match.group(1)))
    for pattern, speed in _SPEED_WORDS:
        if re.search(pattern, instruction, re.IGNORECASE):
            found["speed"].append(speed)
    found["speed_mode"] = [mode for pattern, mode in _SPEED_MODES
                           if re.search(pattern, instruction, re.IGNORECASE)]
    stated = bool(found["x"] or found["y"])
    for name in [] if stated else focus:  # "above the red block": its position
        where = (positions or {}).get(name)
        if where is not None:
            found["x"].append(round(float(where[0]), 2))
            found["y"].append(round(float(where[1]), 2))
    return {k: list(dict.fromkeys(v)) for k, v in found.items()}


# ---------------------------------------------------------------- descriptions
def _number_rule(num: Num, numbers: Mapping[str, Sequence[float]] | None) -> str:
    numbers = numbers or {}
    pool = list(numbers.get(num.kind, []))
    if num.kind == "z":  # "8 cm up"
        pool += numbers.get("length", [])
    if not num.signed:
        pool = [v for v in pool if v >= 0]
    pool = list(dict.fromkeys(pool))
    if pool:
        return _alternatives([gbnf_literal(number_text(v)) for v in pool])
    return "snum" if num.signed else "unum"


def _part(part: Part, objects: Sequence[str], numbers) -> str:
    if isinstance(part, Num):
        return _number_rule(part, numbers)
    if isinstance(part, Choice):
        grounded = (numbers or {}).get(part.name) or part.choices(objects)
        return _alternatives([gbnf_literal(c) for c in grounded])
    return gbnf_literal(part)


def _line_rule(line: Line, objects: Sequence[str], numbers=None) -> str:
    return '"* " ' + " ".join(_part(p, objects, numbers) for p in line.parts) + ' "\\n"'


def _rule_name(key: str) -> str:
    return key.replace("_", "-")  # GBNF rule names: letters, digits and dashes


def _at_least_one(name: str, rules: Sequence[str]) -> str:
    """At least one of ``rules``, in order, each at most once."""
    firsts = [" ".join([rule, *(f"{later}?" for later in rules[i + 1:])])
              for i, rule in enumerate(rules)]
    return f"{name} ::= " + " | ".join(f"({f})" for f in firsts)


def _branch(tag: str, objects: Sequence[str], names: Sequence[str], targets: Sequence[str],
            numbers: Mapping[str, Sequence[float]] | None) -> tuple[str, list[str]]:
    """(the alternatives after the "new task" line, their rules) for one branch; ``names``
    are the object line's choices ("none" among them or not)."""
    rules = [f"{tag}-{_rule_name(ln.key)} ::= {_line_rule(ln, objects, numbers)}"
             for ln in TEMPLATE if ln.optional and ln.key != "place"]
    variants = []
    for i, obj in enumerate(names):
        lines = []
        for line in TEMPLATE:
            if not line.optional or (line.about_object and obj == "none"):
                continue
            if line.key != "place":
                lines.append(f"{tag}-{_rule_name(line.key)}")
                continue
            others = [t for t in targets if t != obj] or [t for t in objects if t != obj]
            if others:
                rules.append(f"{tag}-place-{i} ::= {_line_rule(line, others)}")
                lines.append(f"{tag}-place-{i}")
        rules.append(_at_least_one(f"{tag}-actions-{i}", lines))
        head = gbnf_literal(f"* The object to manipulate is {obj}.\n")
        variants.append(f"({head} {tag}-actions-{i})")
    return _alternatives(variants), rules


def description_grammar(objects: Sequence[str], focus: Sequence[str] = (),
                        previous: str | None = None,
                        numbers: Mapping[str, Sequence[float]] | None = None,
                        allow_none: bool = True) -> str:
    """GBNF for the answer after ``[start of description]\\n`` (see the module docstring).

    ``focus``: the objects the instruction names; ``previous``: the object of the last
    description; ``numbers``: ``ground_numbers`` of the instruction (new tasks only);
    ``allow_none``: whether "none" may be the object when some object is named."""
    names = list(dict.fromkeys([*focus, *([previous] if previous else [])]))
    if allow_none or not names:
        names.append("none")
    targets = list(focus) or list(objects)
    new, new_rules = _branch("n", objects, names, targets, numbers)
    edit, edit_rules = _branch("e", objects, names, targets, None)
    root = (f'root ::= (("* This is a new task.\\n" {new}) | '
            f'("* This is not a new task.\\n" {edit})) {gbnf_literal(END)}')
    return "\n".join([root, *new_rules, *edit_rules, NUMBER_RULES])


# ---------------------------------------------------------------- checking
_TOKEN = re.compile(r'"(?:\\.|[^"\\])*"|\[(?:\\.|[^\]\\])*\]|[()|?*+]|[A-Za-z0-9-]+|\s+')


def grammar_regex(grammar: str) -> re.Pattern[str]:
    """The language of a (non-recursive) GBNF grammar as a Python regex, to check that an
    answer is one the grammar admits (a server that ignores grammars is caught this way)."""
    rules = {}
    for line in grammar.splitlines():
        if "::=" in line:
            name, body = line.split("::=", 1)
            rules[name.strip()] = body.strip()
    done: dict[str, str] = {}

    def convert(name: str, depth: int = 0) -> str:
        if name in done:
            return done[name]
        if depth > 50:
            raise ValueError(f"grammar rule {name!r} is recursive")
        parts = []
        for token in _TOKEN.findall(rules[name]):
            if token.isspace():
                continue
            if token.startswith('"'):
                parts.append(re.escape(json.loads(token)))
            elif token.startswith("["):
                parts.append(token)
            elif token == "(":
                parts.append("(?:")
            elif token in ")|?*+":
                parts.append(token)
            else:
                parts.append(f"(?:{convert(token, depth + 1)})")
        done[name] = "".join(parts)
        return done[name]

    return re.compile(convert("root"), re.DOTALL)


# ---------------------------------------------------------------- code
def quoted(name: str) -> str:
    """An object name as a double-quoted Python string literal."""
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _call(name: str, args: Sequence[str]) -> str:
    inner = ' ", " '.join(args)
    return f'"{name}(" {inner} ")\\n"' if args else f'"{name}()\\n"'


def code_grammar(objects: Sequence[str], new_task: bool) -> str:
    """GBNF for the answer after ``[start of code]\\n``: 1 to ``MAX_CALLS`` API calls."""
    kinds = {"object": "obj", "number": "snum", "point": '"[" snum ", " snum ", " snum "]"'}
    calls = []
    for name, skill in REWARD_API.items():
        if name in _FIXED or (name == "set_place_on" and len(objects) < 2):
            continue
        args = ["objpair"] if name == "set_place_on" else [
            _alternatives([gbnf_literal(quoted(c)) for c in p.choices]) if p.choices
            else kinds[p.kind] for p in skill.params]
        calls.append(_call(name, args))
    pairs = [f'{gbnf_literal(quoted(a))} ", " {gbnf_literal(quoted(b))}'
             for a, b in permutations(objects, 2)]
    first = '"reset_reward()\\n" ' if new_task else ""
    optional = " ".join(["call?"] * (MAX_CALLS - 1))
    rules = [
        f'root ::= {first}call {optional} "execute_plan()\\n" {gbnf_literal(CODE_END)}',
        f"call ::= {_alternatives(calls)}",
        "obj ::= " + _alternatives([gbnf_literal(quoted(o)) for o in objects]),
    ]
    if pairs:
        rules.append("objpair ::= " + _alternatives(pairs))
    return "\n".join([*rules, NUMBER_RULES])
