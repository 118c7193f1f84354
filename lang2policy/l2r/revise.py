"""The revise step of reward refinement: the LLM reads a reflection and edits weights and
parameters of the spec (never its terms, objects, points or success conditions).

The answer is a short list of edit lines, the same for every model::

    [start of edits]
    * reach.weight = 0.5
    * lift.height = 0.12
    [end of edits]

A completion-mode model (the small local one) decodes under a GBNF grammar built from the spec
(``edits_grammar``: only its term ids, each term's number and choice parameters, numbers of a
fixed shape), so its answer always parses; a chat model writes the lines freely and they are
parsed the same way. The edited spec goes through ``validate_spec`` (out-of-range numbers are
clamped with a note); an answer that does not parse, names an unknown term or parameter, or
changes nothing is a ``RevisionError``, and the caller keeps its previous spec.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from lang2policy.errors import RewardSpecError
from lang2policy.l2r.grammar import NUMBER_RULES, number_text
from lang2policy.llm.exchange import LLM, Message
from lang2policy.llm.gbnf import gbnf_literal
from lang2policy.rewards.params import ChoiceParam, NumberParam
from lang2policy.rewards.spec import RewardSpec, validate_spec
from lang2policy.rewards.terms import TERMS
from lang2policy.text_quote import prompt_block, prompt_quote

EDITS_START = "[start of edits]"
EDITS_END = "[end of edits]"
MAX_EDITS = 3
MAX_TOKENS = 120
_EDIT_LINE = re.compile(r"^\*\s*(?P<term>[^=]+?)\.(?P<name>\w+)\s*=\s*(?P<value>.+?)\s*$")

INSTRUCTIONS = f"""You tune the reward of a robot arm. A model-predictive controller (MPC)
minimises the sum of weight x measure of the reward terms; each measure is 0 when its part of the
task is done. After an evaluation you read a reflection: success over a few episodes, and per
term its weighted cost (mean / min / max), its share of the total and whether it was constant.
Rules:
- Success near zero: raise the weight of the goal terms (those of the success conditions) or
  change their parameters.
- A constant term gives the MPC no signal: rescale its parameters or set its weight to 0.
- A term that dominates the cost: lower its weight or raise the others'.
Answer with 1 to {MAX_EDITS} edit lines "* <term id>.<weight or parameter> = <value>" between
{EDITS_START} and {EDITS_END}; only the weights and parameters listed can be edited."""


class RevisionError(RewardSpecError):
    """The LLM's revision was unusable (did not parse, named an unknown term or parameter, or
    changed nothing); the previous spec stays."""


@dataclass(frozen=True)
class Edit:
    """One edit: ``term`` (a term id), ``name`` ("weight" or a parameter), the new value."""

    term: str
    name: str
    value: float | str

    def text(self) -> str:
        value = number_text(self.value) if isinstance(self.value, float) else self.value
        return f"{self.term}.{self.name} = {value}"


@dataclass(frozen=True)
class Revision:
    """A revised spec, the edits asked for and what actually changed ("a.b 1 -> 0.5")."""

    spec: RewardSpec
    edits: tuple[Edit, ...]
    changes: tuple[str, ...]
    notes: tuple[str, ...]  # clamped values
    llm_seconds: float
    reply: str


def editable(spec: RewardSpec) -> dict[str, dict[str, NumberParam | ChoiceParam]]:
    """Per term id, what may be edited: its weight and its number and choice parameters."""
    table = {}
    for t in spec.terms:
        term = TERMS[t.term]
        weight = NumberParam("weight", term.weight.default, term.weight.low, term.weight.high,
                             "", "weight")
        params = {p.name: p for p in term.params if isinstance(p, NumberParam | ChoiceParam)}
        table[t.id] = {"weight": weight, **params}
    return table


def _current(spec: RewardSpec, term_id: str, name: str) -> float | str:
    t = spec.term(term_id)
    return t.weight if name == "weight" else t.params[name]


def _value_text(value: float | str) -> str:
    return number_text(value) if isinstance(value, int | float) else str(value)


def spec_lines(spec: RewardSpec) -> str:
    """The spec as the LLM reads it: one line per term, its editable values and their
    ranges (or choices), then the fixed parameters. Term ids and fixed values (object names)
    come from the LLM's code or a file: each is quoted with ``prompt_quote``."""
    lines = []
    for t in spec.terms:
        term = TERMS[t.term]
        values = []
        for name, decl in editable(spec)[t.id].items():
            allowed = (" | ".join(decl.choices) if isinstance(decl, ChoiceParam)
                       else f"{decl.low:g}..{decl.high:g}")
            values.append(f"{name} = {_value_text(_current(spec, t.id, name))} [{allowed}]")
        fixed = [f"{k} {prompt_quote(str(v))}" for k, v in t.params.items()
                 if k not in editable(spec)[t.id]]
        extra = f"; fixed: {', '.join(fixed)}" if fixed else ""
        lines.append(f"* {prompt_quote(t.id)} ({t.term}: {term.doc}, {term.unit}): "
                     f"{'; '.join(values)}{extra}")
    return "\n".join(lines)


def edits_grammar(spec: RewardSpec, focus: Sequence[str] | None = None) -> str:
    """GBNF for the answer after ``[start of edits]\\n``: 1 to ``MAX_EDITS`` edit lines of
    this spec's editable values (of the ``focus`` term ids only, when given), then
    ``[end of edits]``."""
    alternatives = []
    for t_id, names in editable(spec).items():
        if focus is not None and t_id not in focus:
            continue
        for name, decl in names.items():
            if isinstance(decl, ChoiceParam):
                value = "(" + " | ".join(gbnf_literal(c) for c in decl.choices) + ")"
            else:
                value = "snum" if decl.low < 0 else "unum"
            alternatives.append(f"{gbnf_literal(f'* {t_id}.{name} = ')} {value}")
    optional = " ".join(["edit?"] * (MAX_EDITS - 1))
    return "\n".join([f"root ::= edit {optional} {gbnf_literal(EDITS_END)}",
                      "edit ::= (" + " | ".join(alternatives) + ') "\\n"', NUMBER_RULES])


def parse_edits(reply: str, spec: RewardSpec) -> tuple[Edit, ...]:
    """The edit lines of ``reply`` (between the markers where present), checked against what
    ``spec`` lets edit; ``RevisionError`` saying what was wrong."""
    text = reply.split(EDITS_START, 1)[-1].split(EDITS_END, 1)[0]
    table = editable(spec)
    edits = []
    for line in (ln.strip() for ln in text.splitlines()):
        if not line:
            continue
        match = _EDIT_LINE.match(line)
        if match is None:
            raise RevisionError(f"not an edit line: {line[:80]!r}; expected "
                                "'* <term id>.<weight or parameter> = <value>'")
        term, name, raw = match["term"].strip(), match["name"], match["value"]
        if term not in table:
            raise RevisionError(f"unknown term id {term!r}; ids: {list(table)}")
        if name not in table[term]:
            raise RevisionError(f"{term}.{name} cannot be edited; editable: {list(table[term])}")
        edits.append(Edit(term, name, _parse_value(raw, table[term][name], f"{term}.{name}")))
    if not edits:
        raise RevisionError("the answer holds no edit lines")
    return tuple(edits[:MAX_EDITS])


def _parse_value(raw: str, decl: NumberParam | ChoiceParam, where: str) -> float | str:
    if isinstance(decl, ChoiceParam):
        return raw.strip("'\"")
    try:
        return float(raw.rstrip(",;"))
    except ValueError:
        raise RevisionError(f"{where}: {raw[:40]!r} is not a number") from None


def apply_edits(spec: RewardSpec, edits: Sequence[Edit],
                objects: Sequence[str]) -> tuple[RewardSpec, tuple[str, ...], tuple[str, ...]]:
    """(the edited spec, validated; the changes "id.name old -> new"; clamping notes)."""
    data = spec.to_dict()
    terms = {t["id"]: t for t in data["terms"]}
    for edit in edits:
        if edit.name == "weight":
            terms[edit.term]["weight"] = edit.value
        else:
            terms[edit.term]["params"][edit.name] = edit.value
    validated = validate_spec(data, objects)
    revised = validated.spec
    changes = []
    for edit in dict.fromkeys((e.term, e.name) for e in edits):
        old, new = _current(spec, *edit), _current(revised, *edit)
        if old != new:
            changes.append(f"{edit[0]}.{edit[1]} {_value_text(old)} -> {_value_text(new)}")
    if not changes:
        raise RevisionError("the edits change nothing: "
                            + "; ".join(e.text() for e in edits))
    return revised, tuple(changes), validated.notes


class Reviser:
    """Asks ``llm`` for edits to a spec given its reflection; ``revise`` returns a
    ``Revision`` or raises (``RevisionError``, ``RewardSpecError``, ``LLMError``)."""

    def __init__(self, llm: LLM, objects: Sequence[str], *,
                 constrained: bool | None = None) -> None:
        self.llm = llm
        self.objects = list(objects)
        self.constrained = llm.config.mode == "completion" if constrained is None else constrained

    def revise(self, instruction: str, spec: RewardSpec, reflection: str,
               previous: str = "", temperature: float = 0.0,
               focus: Sequence[str] | None = None) -> Revision:
        """Edits for ``spec`` from the LLM; ``previous`` tells it of the last attempt;
        ``focus``: the term ids a constrained model may edit (the reflection's advice is
        about them), None for all."""
        request = revise_request(instruction, spec, reflection, previous)
        grammar = edits_grammar(spec, focus) if self.constrained else None
        reply = self.llm.complete(self._messages(request), grammar=grammar,
                                  stop=None if self.constrained else [EDITS_END],
                                  max_tokens=MAX_TOKENS, temperature=temperature)
        edits = parse_edits(reply.text, spec)
        revised, changes, notes = apply_edits(spec, edits, self.objects)
        return Revision(revised, edits, changes, notes, reply.latency_s, reply.text)

    def _messages(self, request: str) -> str | list[Message]:
        if self.llm.config.mode == "completion":
            return f"{INSTRUCTIONS}\n\n{EXAMPLE}\n\n{request}"
        return [{"role": "system", "content": f"{INSTRUCTIONS}\n\n{EXAMPLE}"},
                {"role": "user", "content": request}]


def revise_request(instruction: str, spec: RewardSpec, reflection: str,
                   previous: str = "") -> str:
    """The part of the prompt that changes: task, spec, reflection, the last attempt, and the
    opening marker the answer continues from. The task and the last attempt (error texts,
    term ids) are quoted with ``prompt_quote``, the reflection's lines with ``prompt_block``
    (``reflection_text`` quotes its fields)."""
    lines = [f"Task: {prompt_quote(instruction)}", "Reward terms:", spec_lines(spec),
             "Reflection:", prompt_block(reflection)]
    if previous:
        lines.append(f"Last attempt: {prompt_quote(previous)}")
    return "\n".join([*lines, EDITS_START]) + "\n"


EXAMPLE = f"""Example:
Task: lift the red block 10 cm
Reward terms:
* reach (reach: tool centre to an object's centre, m): weight = 1.0 [0..100]; approach = above \
[above | direct]; slope = 2.0 [0..10]; fixed: object red block
* lift (object_height: an object's lift above where it rests on the table, m): weight = 3.0 \
[0..100]; height = 0.1 [0..0.3]; mode = exactly [exactly | at_least | at_most]; fixed: object \
red block
* posture (posture: RMS distance of the arm joints from the home pose, rad): weight = 0.01 \
[0..100]
Reflection:
Evaluated with 2 MPC episodes; success 0/2.
Weighted cost per term (mean / min / max over the plans, share of the total; unweighted measure \
start -> end):
  reach (reach, weight 1): 0.02 / 0.005 / 0.15, 6% of the cost; measure 0.15 -> 0.01 m
  lift (object_height, weight 3): 0.3 / 0.3 / 0.3, 91% of the cost, CONSTANT; measure 0.1 -> \
0.1 m
  posture (posture, weight 0.01): 0.009 / 0.001 / 0.01, 3% of the cost; measure 0.1 -> 0.9 rad
Advice:
- Success is near zero: the goal is not reached. Raise the weight of the goal terms or change \
their parameters.
- 'lift' is constant at 0.3: it gives the optimiser no signal. Rescale its parameters or set \
its weight to 0.
- 'lift' dominates (91% of the cost): lower its weight or raise the others'.
{EDITS_START}
* reach.weight = 3.0
* lift.weight = 1.0
{EDITS_END}"""
