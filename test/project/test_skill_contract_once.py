"""The skill plan's contract (issue 18) has one definition of each part, so the route, the VLA
node and the bench cannot drift apart: the cap on remembered motions (``skill.message``), the
states that end a skill (``graph.topics``), one class per kind of limits (the gate's grant,
the node's run limits) and one box intersection. Read from the source: nothing runs."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "lang2policy"
FINAL = ("success", "timeout", "failed", "stopped", "cancelled", "rejected")


def definitions() -> tuple[dict[str, list[str]], dict[str, list[str]], list[str]]:
    """Module-level constants and classes by name, and the modules holding a literal tuple of
    the final skill states."""
    constants, classes, finals = defaultdict(list), defaultdict(list), []
    for path in sorted(PKG.rglob("*.py")):
        where = path.relative_to(PKG.parent).as_posix()
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef):
                classes[node.name].append(where)
            targets = node.targets if isinstance(node, ast.Assign) else []
            for target in targets:
                if isinstance(target, ast.Name):
                    constants[target.id].append(where)
            value = getattr(node, "value", None)
            if isinstance(value, ast.Tuple):
                items = tuple(getattr(e, "value", None) for e in value.elts)
                if items == FINAL:
                    finals.append(where)
    return constants, classes, finals


def test_each_part_of_the_skill_contract_is_defined_once():
    constants, classes, finals = definitions()
    assert constants["MAX_MOTIONS"] == ["lang2policy/vla/skill/message.py"]
    assert finals == ["lang2policy/graph/topics.py"]
    assert classes["SkillLimits"] == ["lang2policy/vla/skill/limits.py"]
    assert classes["GrantedSkillLimits"] == ["lang2policy/sandbox/skill_gate.py"]


def test_the_route_and_the_probe_use_the_contracts_values():
    from lang2policy.conductor import skill_route
    from lang2policy.graph import topics
    from lang2policy.vla.skill import message as skill_message

    assert skill_route.MAX_MOTIONS is skill_message.MAX_MOTIONS
    assert skill_route.FINAL_SKILL_STATES is topics.FINAL_SKILL_STATES == FINAL
    source = (PKG / "ros" / "vla_bench_probe.py").read_text(encoding="utf-8")
    assert "topics.FINAL_SKILL_STATES" in source
