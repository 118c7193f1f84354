"""The Language to Rewards planner end to end: descriptor, coder, sandbox, validated spec.

Local-model scenarios replay exchanges recorded from the real Gemma 3 270M with constrained
decoding (test/fixtures/llm/l2r_*.jsonl); record them again with
``python test/l2r/test_planner.py record [SCENARIO ...]`` after changing config/prompts/l2r/,
the template or the grammars (a change alters the requests, and a replay then misses).
The free-text (chat model) path is driven by a scripted LLM whose answers are written here.
Tests marked ``llm`` run the real local model.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from support.l2r import HEADINGS, LIFT, LIFT_CODE, SCENE, ScriptedLLM, chat_planner, described

from lang2policy.errors import LLMResponseError, RewardSpecError, UnknownObjectError
from lang2policy.l2r.planner import RewardPlan, RewardPlanner
from lang2policy.l2r.sandboxed import RewardCodeError
from lang2policy.l2r.template import DescriptionError
from lang2policy.llm import make_client

FIXTURES = Path(__file__).parents[1] / "fixtures" / "llm"
# Conversations (each a list of instructions, planned in turn in one planner) recorded from
# the local model. "l2r_tasks" plans each instruction as a new conversation.
SCENARIOS: dict[str, tuple[str, ...]] = {
    "l2r_lift_higher": ("lift the red block 10 cm", "higher"),
    "l2r_tasks": (
        "push the green block 5 cm away from the robot without picking it up",
        "put the red block in the blue bowl",
        "hold the gripper 10 cm above the blue bowl",
        "turn the red block by 45 degrees",
        "move the gripper slowly (under 5 cm/s) to x=0.2, y=0.05, 8 cm up",
    ),
}


def replay_planner(name: str) -> RewardPlanner:
    planner = RewardPlanner(make_client(f"replay:{FIXTURES / name}.jsonl"), SCENE)
    planner.set_scene(SCENE, HEADINGS)
    return planner


def goal(plan: RewardPlan, term_id: str) -> dict:
    return dict(plan.spec.term(term_id).params)


# ---------------------------------------------------------------- free-text path (chat)
def test_chat_path_fills_the_template_writes_code_and_validates_the_spec():
    planner, llm = chat_planner([described(LIFT), LIFT_CODE])
    plan = planner.plan("lift the red block 10 cm")
    assert not planner.constrained and plan.new_task and plan.attempts == 1
    assert goal(plan, "lift") == {"object": "red block", "height": 0.1, "mode": "exactly"}
    assert [c.term for c in plan.spec.conditions] == ["lift"]
    assert plan.calls == ("reset_reward", "set_lift", "execute_plan") and plan.notes == ()
    system, user = llm.requests[0].messages[0], llm.requests[0].messages[-1]
    assert "{CHOICE: [is, is not]}" in system["content"]
    assert user["content"].endswith("lift the red block 10 cm (0.1 m). Make sure to ignore "
                                    "irrelevant options.")
    assert "red block at (0.20, 0.10)" in user["content"]
    coder = llm.requests[1].messages
    assert len(coder) == 2 and coder[1]["content"] == plan.description.join(
        ["[start of description]\n", "\n[end of description]"])
    assert "def set_lift(obj, height):" in coder[0]["content"]


def test_a_reply_with_unfilled_slots_is_asked_again_at_a_higher_temperature():
    unfilled = described("* The object should be lifted [NUM: 0.1] m above the table.")
    planner, llm = chat_planner([unfilled, "Sure! Here you go.", described(LIFT), LIFT_CODE])
    plan = planner.plan("lift the red block 10 cm")
    assert plan.attempts == 3 and goal(plan, "lift")["height"] == 0.1
    assert "unfilled slots" in plan.retried_because[0]
    assert "no description between" in plan.retried_because[1]
    assert [r.temperature for r in llm.requests[:3]] == [0.0, 0.3, 0.6]


def test_retries_are_bounded_and_end_in_a_clear_error():
    choice = described("* The object should be {CHOICE: [grasped, pushed]}.")
    planner, llm = chat_planner([choice] * 3, attempts=3)
    with pytest.raises(DescriptionError, match=r"no usable motion description after 3 attempts"
                       r".*unfilled slots"):
        planner.plan("lift the red block 10 cm")
    assert len(llm.requests) == 3 and planner.descriptor.history == []


def test_unknown_objects_and_garbage_are_rejected_with_what_is_allowed():
    planner, _ = chat_planner([described(LIFT, obj="purple unicorn")] * 3)
    with pytest.raises(DescriptionError, match=r"'purple unicorn' is not in the scene; objects: "
                       r"\['blue bowl', 'green block', 'red block'\] or none"):
        planner.plan("lift the purple unicorn")
    planner, _ = chat_planner([described(LIFT), 'set_lift("purple unicorn", 0.1)'])
    with pytest.raises(RewardCodeError, match="'purple unicorn' is not in the scene"):
        planner.plan("lift the red block 10 cm")
    planner, _ = chat_planner([described(LIFT), "import os\nos.system('rm -rf /')"])
    with pytest.raises(RewardCodeError, match="import of 'os' is not allowed"):
        planner.plan("lift the red block 10 cm")
    planner, _ = chat_planner([described(LIFT), "execute_plan()"])
    with pytest.raises(RewardCodeError, match="set no reward terms"):
        planner.plan("lift the red block 10 cm")
    with pytest.raises(UnknownObjectError, match=r"names purple block, which is not in the "
                       r"scene; objects: \['blue bowl', 'green block', 'red block'\]"):
        chat_planner([])[0].plan("lift the purple block")  # before any LLM call
    for bad in ("", "   ", "x" * 501, "lift\x00it"):
        with pytest.raises(Exception, match="instruction"):
            planner.plan(bad)


def test_not_a_new_task_edits_the_running_spec_and_a_new_task_replaces_it():
    higher = described("* The object should be lifted 0.15 m above the table.", new=False)
    slow = described("* The gripper should move no faster than 0.05 m/s.", new=False)
    push = described("* The object should be pushed, without grasping it, to the point "
                     "x = 0.25 m, y = 0.0 m.", obj="green block")
    planner, llm = chat_planner([
        described(LIFT), LIFT_CODE,
        higher, 'set_lift("red block", 0.15)\nexecute_plan()',
        slow, "set_speed_limit(0.05)\nexecute_plan()",
        push, 'reset_reward()\nset_push("green block", 0.25, 0.0)\nexecute_plan()',
    ])
    first = planner.plan("lift the red block 10 cm")
    second = planner.plan("higher", first.spec)
    assert not second.new_task and goal(second, "lift")["height"] == 0.15
    assert [t.id for t in second.spec.terms] == [t.id for t in first.spec.terms]
    assert second.spec.task == "lift the red block 10 cm; higher"
    third = planner.plan("slower", second.spec)  # adds a term, keeps the lift
    assert goal(third, "lift")["height"] == 0.15 and goal(third, "speed")["speed"] == 0.05
    history = llm.requests[4].messages  # the third descriptor call saw both earlier turns
    assert [m["role"] for m in history] == ["system", "user", "assistant", "user", "assistant",
                                            "user"]
    assert "lifted 0.15 m" in history[4]["content"]
    fourth = planner.plan("push the green block to x 0.25, y 0", third.spec)
    assert fourth.new_task and {"lift", "speed", "reach"}.isdisjoint(
        t.id for t in fourth.spec.terms)
    assert goal(fourth, "push_to")["point"] == (0.25, 0.0, 0.0125)
    planner.reset()
    assert planner.descriptor.history == []


def test_an_edit_with_nothing_running_is_planned_as_a_new_task_with_a_note():
    planner, _ = chat_planner([described(LIFT, new=False), 'set_lift("red block", 0.1)'])
    plan = planner.plan("lift it 10 cm")
    assert plan.new_task and any("no reward is running" in n for n in plan.notes)
    assert any("did not call execute_plan()" in n for n in plan.notes)


def test_clamped_values_are_reported_in_the_notes():
    planner, _ = chat_planner([
        described("* The object should be lifted 2 m above the table."),
        'reset_reward()\nset_lift("red block", 2.0)\nexecute_plan()'])
    plan = planner.plan("lift the red block 2 m")
    assert goal(plan, "lift")["height"] == 0.3
    assert plan.notes == ("terms[4] (object_height).params.height: 2 is outside [0, 0.3], "
                          "clamped to 0.3",)


def test_truncated_answers_count_as_failed_attempts():
    class Truncating(ScriptedLLM):
        def complete(self, *args, **kwargs):
            reply = super().complete(*args, **kwargs)
            if "[NUM" in reply.text:
                raise LLMResponseError("cut off at max_tokens", reply)
            return reply

    llm = Truncating([described("* The object should be lifted [NUM"), described(LIFT),
                      LIFT_CODE])
    planner = RewardPlanner(llm, SCENE)
    plan = planner.plan("lift the red block 10 cm")
    assert plan.attempts == 2 and "cut off" in plan.retried_because[0]


def test_lines_outside_the_template_go_to_the_coder_as_notes():
    planner, _ = chat_planner([described(LIFT, "* Be gentle with it."), LIFT_CODE])
    plan = planner.plan("lift the red block 10 cm, gently")
    assert plan.notes == ("description line not in the template (left to the coder): "
                          "Be gentle with it.",)


def test_the_planner_rejects_bad_scenes():
    with pytest.raises(Exception, match="distinct, non-empty object names"):
        RewardPlanner(ScriptedLLM([]), [])
    with pytest.raises(Exception, match="distinct, non-empty object names"):
        RewardPlanner(ScriptedLLM([]), ["a", "a"])
    with pytest.raises(Exception, match="list of names or a mapping"):
        RewardPlanner(ScriptedLLM([]), "red block")


# ---------------------------------------------------------------- the local model, replayed
def test_replayed_local_model_lifts_then_higher_edits_the_running_spec():
    planner = replay_planner("l2r_lift_higher")
    assert planner.constrained
    first = planner.plan("lift the red block 10 cm")
    assert first.new_task and goal(first, "lift")["height"] == 0.1
    assert goal(first, "lift")["object"] == "red block"
    assert first.code == 'reset_reward()\nset_lift("red block", 0.1)\nexecute_plan()\n'
    second = planner.plan("higher", first.spec)
    assert not second.new_task and goal(second, "lift")["height"] > 0.1
    assert "reset_reward" not in second.code
    assert [t.id for t in second.spec.terms] == [t.id for t in first.spec.terms]


def test_replayed_local_model_answers_always_parse_and_validate():
    planner = replay_planner("l2r_tasks")
    plans = {}
    for instruction in SCENARIOS["l2r_tasks"]:
        planner.reset()
        plans[instruction] = planner.plan(instruction)
    for instruction, plan in plans.items():
        assert plan.attempts == 1 and plan.new_task, instruction
        assert plan.code.startswith("reset_reward()\n"), plan.code
        assert plan.code.endswith("execute_plan()\n"), plan.code
    calls = {i: set(p.calls) - {"reset_reward", "execute_plan"} for i, p in plans.items()}
    assert calls[SCENARIOS["l2r_tasks"][0]] == {"set_push_by"}
    assert calls[SCENARIOS["l2r_tasks"][1]] == {"set_place_on"}
    assert calls[SCENARIOS["l2r_tasks"][3]] == {"set_turn"}
    turned = plans[SCENARIOS["l2r_tasks"][3]]
    assert goal(turned, "yaw")["yaw_deg"] == 55.0  # the red block's heading 10 + 45
    pushed = plans[SCENARIOS["l2r_tasks"][0]]
    x, y = goal(pushed, "push_to")["point"][:2]
    assert x > SCENE["green block"][0] and y < SCENE["green block"][1]  # radially away


# ---------------------------------------------------------------- the real local model
@pytest.mark.llm
@pytest.mark.slow
def test_the_local_model_under_the_grammar_always_gives_valid_specs():
    planner = RewardPlanner(make_client("local"), SCENE)
    planner.set_scene(SCENE, HEADINGS)
    instructions = [*SCENARIOS["l2r_tasks"], "do a backflip", "lift the red block 10 cm",
                    "avoid the blue bowl", "the the the", "stack everything quickly"]
    for instruction in instructions:
        planner.reset()
        plan = planner.plan(instruction)
        print(f"\n{instruction!r} ({plan.plan_ms / 1000:.1f} s): {plan.code!r}")
        assert plan.attempts == 1 and plan.spec.terms


@pytest.mark.llm
@pytest.mark.slow
def test_the_local_model_lifts_and_higher_raises_the_height():
    planner = RewardPlanner(make_client("local"), SCENE)
    first = planner.plan("lift the red block 10 cm")
    second = planner.plan("higher", first.spec)
    assert goal(first, "lift")["height"] == 0.1
    assert not second.new_task and goal(second, "lift")["height"] > 0.1


# ---------------------------------------------------------------- recording the fixtures
def record(names: list[str]) -> None:
    for name in names or list(SCENARIOS):
        path = FIXTURES / f"{name}.jsonl"
        path.unlink(missing_ok=True)
        planner = RewardPlanner(make_client(f"record:{path}"), SCENE)
        planner.set_scene(SCENE, HEADINGS)
        current = None
        for instruction in SCENARIOS[name]:
            if name == "l2r_tasks":
                planner.reset()
                current = None
            try:
                plan = planner.plan(instruction, current)
            except (RewardCodeError, RewardSpecError, DescriptionError) as exc:
                print(f"--- {name}: {instruction!r} -> {type(exc).__name__}: {exc}")
                continue
            current = plan.spec
            print(f"--- {name}: {instruction!r} ({plan.plan_ms / 1000:.1f} s)\n"
                  f"{plan.description}\n{plan.code}notes: {plan.notes}")


if __name__ == "__main__":
    if sys.argv[1:2] != ["record"]:
        sys.exit("usage: python test/l2r/test_planner.py record [SCENARIO ...]")
    record(sys.argv[2:])
