"""Routing of live corrections (``lang2policy.planning.correcting``): what a correction does
to a running reward spec or code plan, what is remembered, and what a later instruction gets."""

from __future__ import annotations

import pytest

from lang2policy.corrections import CorrectionMemory
from lang2policy.errors import Lang2PolicyError
from lang2policy.planning.correcting import ArgEdits, CorrectionRouter
from lang2policy.rewards.spec import validate_spec

OBJECTS = ["red block", "blue block", "green bowl", "yellow bowl"]
POSITIONS = {"red block": [0.2, 0.05, 0.0125], "blue block": [0.25, -0.1, 0.0125]}
HOVER = validate_spec(
    {
        "task": "hover over the red block",
        "terms": [
            {
                "id": "above",
                "term": "tool_above",
                "params": {"point": [0.2, 0.05, 0.0], "height": 0.1},
            }
        ],
    },
    OBJECTS,
).spec


@pytest.fixture(scope="module")
def memory_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("memory")


def test_an_offset_on_a_running_spec_moves_its_point_and_is_remembered(memory_dir):
    memory = CorrectionMemory(memory_dir / "spec.jsonl")
    router = CorrectionRouter(memory)
    routed = router.route(
        "a bit to the left", OBJECTS, instruction="hover over the red block", spec=HOVER
    )
    assert routed.action == "edit_spec" and routed.correction.kind == "offset"
    before = HOVER.to_dict()["terms"][0]["params"]["point"]
    after = routed.spec.to_dict()["terms"][0]["params"]["point"]
    assert after[1] > before[1] + 0.01 and after[0] == pytest.approx(before[0])  # left is +y
    assert [r.text for r in memory.records()] == ["a bit to the left"]

    # The same request again, worded differently: the remembered offset is applied up front.
    applied, used = router.recall_into_spec("hover above the red block", HOVER, OBJECTS)
    assert used and used[0].score >= 0.8
    assert applied.spec.to_dict()["terms"][0]["params"]["point"] == after
    unrelated, none = router.recall_into_spec("stack the blue block on the red one", HOVER, OBJECTS)
    assert unrelated is None and not none


def test_edits_of_a_running_code_plan_apply_to_its_calls_in_order(memory_dir):
    router = CorrectionRouter(CorrectionMemory(memory_dir / "code.jsonl"))
    edits = ArgEdits(lambda: (OBJECTS, POSITIONS), on_accepted=router.remember_accepted)
    call = ("put_first_on_second", {"obj": "red block", "target": "green bowl"})
    first = router.route(
        "no, the blue one",
        OBJECTS,
        instruction="put the red block in the green bowl",
        code_call=call,
        edits=edits,
    )
    second = router.route(
        "slower",
        OBJECTS,
        instruction="put the red block in the green bowl",
        code_call=call,
        edits=edits,
    )
    assert (first.action, second.action) == ("edit_code", "edit_code")
    args = edits(*call)
    assert args["obj"] == "blue block" and args["target"] == "green bowl"
    assert args["speed"] < 0.15  # the skill's default speed, halved
    assert edits("open_gripper", {}) == {}  # edits that do not fit a call leave it alone
    assert not router.memory.records()  # remembered only once the privilege gate allows them
    edits.accept_pending()  # what SandboxRunner does when the edited call is allowed

    later = ArgEdits(lambda: (OBJECTS, POSITIONS))
    recalled = router.recall_into_edits("put the red block in the green bowl", later)
    assert [r.record.text for r in recalled] == ["no, the blue one", "slower"]
    assert later(*call)["obj"] == "blue block"


def test_an_edit_said_while_no_motion_runs_applies_to_the_next_call_and_is_remembered_with_it(
    memory_dir,
):
    """The program is starting (or between two calls): no call is current, the edit still
    applies, from the next motion on, and is remembered with the call it was accepted on."""
    router = CorrectionRouter(CorrectionMemory(memory_dir / "between.jsonl"))
    edits = ArgEdits(lambda: (OBJECTS, POSITIONS), on_accepted=router.remember_accepted)
    routed = router.route(
        "no, the yellow bowl", OBJECTS, instruction="put the red block in the green bowl",
        code_call=None, edits=edits,
    )
    assert routed.action == "edit_code", routed.as_dict()
    assert "next motion" in routed.notes[0]
    call = ("put_first_on_second", {"obj": "red block", "target": "green bowl"})
    assert edits(*call)["target"] == "yellow bowl"  # what the gate decides
    assert not router.memory.records()
    edits.accept_pending()
    [record] = router.memory.records()
    assert record.text == "no, the yellow bowl"
    assert record.situation["skill"] == "put_first_on_second"
    assert record.situation["args"]["target"] == "green bowl"  # the call as the program wrote it


def test_stop_and_replan_are_left_to_the_caller_and_nothing_running_is_refused():
    router = CorrectionRouter(memory=None)
    assert router.route("stop!", OBJECTS, instruction="x", spec=HOVER).action == "stop"
    assert router.route("do a little dance", OBJECTS, instruction="x").action == "replan"
    idle = router.route("a bit higher", OBJECTS, instruction="")
    assert idle.action == "rejected" and "nothing is running" in idle.error
    unfit = router.route("no, the green bowl", OBJECTS, instruction="x", spec=HOVER)
    assert unfit.action == "rejected" and unfit.error
    with pytest.raises(Lang2PolicyError):
        router.route("\x00\x01", OBJECTS, instruction="x", spec=HOVER)
