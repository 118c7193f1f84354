"""What every edit of a running plan shares, whether it edits a reward spec or a skill call.

``not_an_edit`` is the error for a correction that is no edit (stop, re-plan), ``rounded``
keeps edited coordinates readable, and ``replaced_object`` says which object a target change
swaps out of those the plan acts on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from lang2policy.corrections.correction import Correction, CorrectionError
from lang2policy.graph import topics

Positions = Mapping[str, Sequence[float]]


def not_an_edit(correction: Correction) -> CorrectionError:
    """The error for a stop or re-plan correction handed to an edit: where it belongs."""
    if correction.kind == "stop":
        return CorrectionError(
            "'stop' is not an edit: halt the robot (the safety node's "
            f"{topics.STOP.name}), then give a new instruction"
        )
    return CorrectionError(
        f"'{correction.text}' is a plan-level correction: re-plan it with "
        "the running task as context; only offset, speed and target "
        "corrections are applied as edits"
    )


def rounded(point: Sequence[float]) -> list[float]:
    """Coordinates to the micrometre: no 0.18000000000000002 in specs people read."""
    return [round(float(v), 6) for v in point]


def replaced_object(correction: Correction, acting: list[str]) -> str:
    """The object the correction swaps out, checked against what the plan acts on."""
    new = str(correction.target)
    if correction.replaces is not None:
        if correction.replaces not in acting:
            raise CorrectionError(
                f"'{correction.text}': the task does not act on the "
                f"{correction.replaces} (it acts on {acting or 'no object'})"
            )
        return correction.replaces
    kind = new.split()[-1]
    same_kind = [a for a in acting if a.split()[-1] == kind and a != new]
    if len(same_kind) == 1:
        return same_kind[0]
    if new in acting:
        raise CorrectionError(f"'{correction.text}': the task already acts on the {new}")
    raise CorrectionError(
        f"'{correction.text}': cannot tell which object the {new} replaces; the task acts on "
        f"{acting or 'no object'} ({'none' if not same_kind else 'several'} of them a {kind}). "
        "Say it as 'the blue block, not the red block', or give the whole task again"
    )
