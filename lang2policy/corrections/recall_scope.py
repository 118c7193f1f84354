"""Which remembered corrections a new instruction may recall, besides being similar enough.

A "bit to the left" remembered for "hover over the red block" was applied to an instruction
about another object (similarity 0.82): wording alone is not enough. ``objects_named`` reads
the objects an instruction names, and recall keeps a record only when they are the same.
"""

from __future__ import annotations

import re

# Which remembered corrections a new instruction may recall, besides being similar enough:
# "objects": those made for an instruction that names the same objects (a "bit to the left"
# for the red block is not applied to the yellow bowl); "run": those too, and only the ones
# made since this graph started.
RECALL_SCOPES = ("objects", "run")
_OBJECT = re.compile(r"\b(?:([a-z]+) )?(block|bowl|cube)s?\b")
_NOT_A_NAME = frozenset(
    [
        "the",
        "a",
        "an",
        "this",
        "that",
        "each",
        "every",
        "all",
        "both",
        "one",
        "two",
        "three",
        "its",
        "their",
    ]
)


def objects_named(instruction: str) -> frozenset[str]:
    """The objects an instruction names ("red block"; "block" for one named by kind only; a
    cube is a block), for recall's scope: an instruction about the gripper alone names none."""
    found = set()
    for word, kind in _OBJECT.findall(" ".join(instruction.lower().split())):
        kind = "block" if kind == "cube" else kind
        found.add(kind if not word or word in _NOT_A_NAME else f"{word} {kind}")
    return frozenset(found)
