"""How strongly code plans are grounded in the scene and the skill catalog (issue 15).

``GroundingSettings`` is what ``CodeAsPoliciesPlanner`` and ``PlanLoop`` take; ``off()`` is the
ungrounded baseline the benchmarks measure against in the same run.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GroundingSettings:
    """The grounding switches of code planning.

    ``grammar``: decode under a grammar built from the skill catalog and the objects present
    (where the endpoint supports grammars; elsewhere candidates are checked after decoding).
    ``candidates``: programs sampled and scored SayCan-style (1: the greedy one only).
    ``retrieved_examples``: few-shot examples chosen by similarity to the instruction and
    shown again right before it, after every example (0: the prompt's examples only; see
    ``CodeAsPoliciesPlanner.main_prompt``). ``dry_run``: run the chosen program on a simulated
    copy of the scene before the arm moves. ``check_goal``: judge the outcome by the plan's
    success condition in the simulator state. ``function_library``: a helper the program calls that
    the function-writing prompt already defines (``get_block_names``, ``matching_bowl``, ...)
    is taken from there, without an LLM call.
    """

    grammar: bool = True
    candidates: int = 1  # benches measure 3; on two cores each one costs an LLM call
    retrieved_examples: int = 2
    dry_run: bool = True
    check_goal: bool = True
    function_library: bool = True

    def __post_init__(self) -> None:
        if not 1 <= self.candidates <= 16:
            raise ValueError(f"candidates must be 1..16, got {self.candidates}")
        if not 0 <= self.retrieved_examples <= 32:
            raise ValueError(f"retrieved_examples must be 0..32, got {self.retrieved_examples}")

    @classmethod
    def named(cls, name: str) -> GroundingSettings:
        """``"on"`` (the defaults) or ``"off"`` (the baseline), as a parameter or flag says."""
        if name not in ("on", "off"):
            raise ValueError(f"grounding must be 'on' or 'off', got {name!r}")
        return cls() if name == "on" else cls.off()

    @classmethod
    def off(cls) -> GroundingSettings:
        """Today's planner: free decoding, one program, the fixed examples, no checks (the
        goal is still checked: an honest status is not a grounding option)."""
        return cls(
            grammar=False,
            candidates=1,
            retrieved_examples=0,
            dry_run=False,
            function_library=False,
        )
