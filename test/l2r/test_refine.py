"""Eureka-style reward refinement: MPC statistics, reflection text, the revise step, the
keep-best rounds and ``lang2policy refine-reward``.

The statistics come from real lockstep MPC episodes (16 samples, 1-2 simulated seconds, so
each takes a second or two on 2 cores). The revise step is driven by a scripted LLM (a test
double: a paid remote model cannot run here); the test marked ``llm`` asks the real local model.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pytest

from lang2policy import cli
from lang2policy.bench.l2r_tasks import TASKS
from lang2policy.commands import refine_reward as command
from lang2policy.l2r.grammar import grammar_regex
from lang2policy.l2r.refine import RETRY_TEMPERATURE, refine, status_line
from lang2policy.l2r.reflection import (
    EpisodeResult,
    EvalSettings,
    Scene,
    SpecStats,
    TermStats,
    advice,
    evaluate,
    focus_terms,
    reflection_text,
)
from lang2policy.l2r.revise import (
    EDITS_END,
    EDITS_START,
    Edit,
    Reviser,
    Revision,
    RevisionError,
    edits_grammar,
    spec_lines,
)
from lang2policy.llm import LLMConfig, LLMReply, build_request, make_client
from lang2policy.rewards.spec import RewardSpec, validate_spec
from lang2policy.scene.world import World

SEED = 0
FAST = EvalSettings(episodes=1, samples=16, seed=0, max_seconds=1.0)
CHAT = LLMConfig(model="scripted-chat", base_url="http://127.0.0.1:9/v1", api_key_env=None,
                 mode="chat")


class ScriptedLLM:
    """An LLM that answers from a list, recording every request it was sent."""

    def __init__(self, answers: Sequence[str], config: LLMConfig = CHAT) -> None:
        self.config, self.answers, self.requests = config, list(answers), []

    def complete(self, prompt_or_messages, **options) -> LLMReply:
        self.requests.append(build_request(self.config, prompt_or_messages, **options))
        if not self.answers:
            raise AssertionError("unexpected LLM call")
        return LLMReply(self.answers.pop(0), "stop", None, None, 0.25, self.config.model)


def edits(*lines: str) -> str:
    return "\n".join([EDITS_START, *lines, EDITS_END])


@pytest.fixture(scope="module")
def seeded_world() -> World:
    world = World("so101")
    world.reset(SEED)
    return world


@pytest.fixture(scope="module")
def blocks(seeded_world) -> list[str]:
    return [n for n in seeded_world.present if n.endswith("block")]


def reach_spec(blocks: list[str], **success) -> RewardSpec:
    """Reach for the first block with a heavy weight (it dominates); the second block's lift
    to 10 cm is asked but nothing ever lifts it (a constant term)."""
    data = {"task": "test", "duration": 1.0, "terms": [
        {"term": "reach", "weight": 50.0, "params": {"object": blocks[0]}},
        {"id": "far", "term": "object_height", "weight": 1.0,
         "params": {"object": blocks[1], "height": 0.1}}]}
    if success:
        data["success"] = success
    return validate_spec(data, blocks).spec


@pytest.fixture(scope="module")
def reach_stats(seeded_world, blocks) -> SpecStats:
    return evaluate(seeded_world, reach_spec(blocks), Scene(SEED), FAST)


# ---------------------------------------------------------------- statistics
def test_a_dominant_and_a_constant_term_are_reported_as_such(reach_stats):
    terms = {t.id: t for t in reach_stats.terms}
    assert reach_stats.dominant().id == "reach" and terms["reach"].share >= 0.8
    assert not terms["reach"].constant and terms["reach"].max > terms["reach"].min
    assert terms["reach"].end < terms["reach"].start  # the MPC moved the tool toward it
    assert terms["far"].constant and terms["far"].mean == pytest.approx(0.1, abs=0.005)
    assert terms["table_clearance"].constant and terms["table_clearance"].max == 0.0
    assert sum(t.share for t in reach_stats.terms) == pytest.approx(1.0, abs=1e-3)
    assert reach_stats.successes == 0 and reach_stats.mean_time is None  # no conditions
    assert reach_stats.episodes[0].sim_seconds == pytest.approx(1.0)


def test_the_advice_follows_eurekas_rules(reach_stats):
    lines = advice(reach_stats)
    assert lines[0].startswith("Success is near zero")
    assert any(line.startswith("'far' is constant at 0.1") for line in lines)
    assert any(line.startswith("'reach' dominates") for line in lines)
    assert not any("table_clearance" in line for line in lines)  # a guard at 0 is fine
    assert focus_terms(reach_stats) == ["reach", "far"]


def test_the_focus_is_the_terms_the_advice_names(blocks):
    half = fake_stats(1, 0.5)  # success 1/2: only the constant and dominating terms
    terms = (*half.terms, replace(half.terms[0], id="far", share=0.0, constant=True),
             replace(half.terms[0], id="posture", term="posture", share=0.0))
    assert focus_terms(replace(half, terms=terms)) == ["far", "goal"]
    language = grammar_regex(edits_grammar(reach_spec(blocks), ["far"]))
    assert language.fullmatch(f"* far.height = 0.05\n{EDITS_END}")
    assert not language.fullmatch(f"* reach.weight = 2\n{EDITS_END}")


def test_the_reflection_text_holds_outcome_terms_and_advice(reach_stats):
    text = reflection_text(reach_stats)
    assert text.startswith("Evaluated with 1 MPC episodes; success 0/1.")
    far = next(line for line in text.splitlines() if line.strip().startswith("far "))
    assert "(object_height, weight 1)" in far and "CONSTANT" in far and far.endswith(" m")
    assert "Advice:\n- Success is near zero" in text


def test_success_time_and_judged_error_come_from_the_judge(seeded_world, blocks):
    easy = reach_spec(blocks, all=[{"term": "far", "below": 0.2}], hold=0.0)
    won = evaluate(seeded_world, easy, Scene(SEED), FAST)
    assert won.successes == 1 and won.mean_time is not None and won.mean_time < 0.1
    assert won.judged_error == pytest.approx(0.1 / 0.2, rel=0.05)
    strict = reach_spec(blocks, all=[{"term": "far", "below": 0.05}], hold=0.0)
    judged = evaluate(
        seeded_world, easy, Scene(SEED), FAST, judge=strict, judge_name="a strict one"
    )
    assert judged.successes == 0 and judged.judge == "a strict one"
    assert judged.judged_error == pytest.approx(0.1 / 0.05, rel=0.05)
    assert judged.score() < won.score()


def test_a_spec_naming_objects_off_the_table_is_refused(seeded_world, blocks):
    absent = next(n for n in sorted(seeded_world.objects) if n not in seeded_world.present)
    spec = validate_spec({"terms": [{"term": "reach", "params": {"object": absent}}]},
                         sorted(seeded_world.objects)).spec
    with pytest.raises(Exception, match="not in the scene"):
        evaluate(seeded_world, spec, Scene(SEED), FAST)


# ---------------------------------------------------------------- revise step
def test_the_reviser_applies_edits_and_shows_the_llm_the_reflection(reach_stats, blocks):
    spec = reach_spec(blocks)
    llm = ScriptedLLM([edits("* reach.weight = 5", "* far.height = 0.05")])
    revision = Reviser(llm, blocks).revise("reach it", spec, reflection_text(reach_stats))
    assert revision.spec.term("reach").weight == 5.0
    assert revision.spec.term("far").params["height"] == 0.05
    assert revision.changes == ("reach.weight 50.0 -> 5.0", "far.height 0.1 -> 0.05")
    assert revision.llm_seconds == 0.25 and revision.spec.conditions == spec.conditions
    user = llm.requests[0].messages[-1]["content"]
    assert "Task: reach it" in user and "'reach' dominates" in user
    assert "* far (object_height:" in user and user.endswith(EDITS_START + "\n")


@pytest.mark.parametrize(("answer", "message"), [
    ("Sure, lower the weights.", "not an edit line"),
    (edits(), "no edit lines"),
    (edits("* nope.weight = 1"), "unknown term id 'nope'"),
    (edits("* reach.object = 'blue bowl'"), "reach.object cannot be edited"),
    (edits("* reach.weight = lots"), "'lots' is not a number"),
    (edits("* reach.weight = 50"), "the edits change nothing"),
    (edits("* far.mode = sideways"), "'sideways' is not one of"),
])
def test_unusable_answers_are_clear_errors(blocks, answer, message):
    with pytest.raises(Exception, match=message) as caught:
        Reviser(ScriptedLLM([answer]), blocks).revise("reach it", reach_spec(blocks), "r")
    assert isinstance(caught.value, RevisionError) or "is not one of" in message


def test_out_of_range_values_are_clamped_with_a_note(blocks):
    revision = Reviser(ScriptedLLM([edits("* reach.weight = 900")]), blocks).revise(
        "reach it", reach_spec(blocks), "r")
    assert revision.spec.term("reach").weight == 100.0
    assert "clamped to 100" in revision.notes[0]


def test_the_grammar_admits_only_this_specs_editable_values(blocks):
    spec = reach_spec(blocks)
    language = grammar_regex(edits_grammar(spec))
    assert language.fullmatch(f"* reach.weight = 2.5\n* far.mode = at_least\n{EDITS_END}")
    assert not language.fullmatch(f"* reach.object = 1\n{EDITS_END}")
    assert not language.fullmatch(f"* grasp.weight = 1\n{EDITS_END}")
    assert not language.fullmatch(f"* far.mode = sideways\n{EDITS_END}")
    assert "slope = 2.0 [0..10]" in spec_lines(spec)


def test_a_completion_model_decodes_under_the_grammar(blocks):
    completion = CHAT.replace(mode="completion")
    llm = ScriptedLLM([f"* reach.weight = 2\n{EDITS_END}"], completion)
    Reviser(llm, blocks).revise("reach it", reach_spec(blocks), "r")
    assert llm.requests[0].grammar == edits_grammar(reach_spec(blocks))
    assert llm.requests[0].prompt.endswith(EDITS_START + "\n")


# ---------------------------------------------------------------- keep the best
def fake_stats(successes: int, error: float) -> SpecStats:
    term = TermStats("goal", "reach", 1.0, error, 0.0, error, 1.0, False, error, error)
    episodes = tuple(EpisodeResult(i, "success" if i < successes else "timeout", 2.0, error)
                     for i in range(2))
    return SpecStats((term,), episodes, "test")


def test_refine_keeps_the_best_spec_and_logs_failed_rounds(blocks):
    specs = [replace(reach_spec(blocks), task=f"v{i}" if i else "test") for i in range(4)]
    scores = {"test": (0, 3.0), "v1": (1, 2.0), "v3": (1, 2.5)}
    calls = []

    def evaluate_spec(spec, index):
        return fake_stats(*scores[spec.task])

    def revise_spec(best, last, temperature):
        calls.append((best.spec.task, last, temperature))
        version = len(calls)
        if version == 2:
            raise RevisionError("no edit lines")
        return Revision(specs[version], (Edit("goal", "weight", 2.0),), ("goal.weight 1 -> 2",),
                        (), 0.5, "")

    result = refine(specs[0], evaluate_spec, revise_spec, rounds=4)
    assert [r.best for r in result.rounds] == [True, True, False, False]
    assert result.best.index == 2 and result.best.spec.task == "v1"
    assert result.rounds[2].error == "RevisionError: no edit lines"
    assert [c[0] for c in calls] == ["test", "v1", "v1"]  # always revises the best spec
    assert [c[2] for c in calls] == [0.0, 0.0, RETRY_TEMPERATURE]
    assert "the revision failed" in calls[2][1]
    assert status_line(result.rounds[2], 4).startswith("round 3/4: revision failed")
    line = status_line(result.rounds[1], 4)
    assert line.startswith("round 2/4: success 1/2, mean time 2.0 s, error 2,")
    assert "changed goal.weight 1 -> 2 (LLM 0.5 s) [best]" in line


def test_refine_needs_at_least_one_round(blocks):
    with pytest.raises(Exception, match="rounds must be at least 1"):
        refine(reach_spec(blocks), None, None, rounds=0)


# ---------------------------------------------------------------- the command
@pytest.mark.parametrize(("argv", "message"), [
    (["refine-reward", "  "], "the instruction is empty"),
    (["refine-reward", "lift the white block 10 cm"], "names white block"),
    (["refine-reward", "lift it", "--max-seconds", "0.1"], "--max-seconds must be in"),
])
def test_bad_input_is_a_clear_error_without_a_traceback(capsys, argv, message):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize("argv", [["refine-reward", "x", "--rounds", "0"],
                                  ["refine-reward", "x", "--episodes", "-1"]])
def test_out_of_range_counts_are_usage_errors(capsys, argv):
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 2 and "out of range" in capsys.readouterr().err


HOVER = ("[start of description]\n* This is a new task.\n* The object to manipulate is none.\n"
         "* The gripper should hover 0.1 m above the point x = 0.2 m, y = 0.0 m.\n"
         "[end of description]")
HOVER_CODE = "```python\nreset_reward()\nset_hover(0.2, 0.0, 0.1)\nexecute_plan()\n```"


def test_the_command_logs_every_round_and_writes_the_best_spec(tmp_path, monkeypatch, capsys):
    llm = ScriptedLLM([HOVER, HOVER_CODE, "no edits today",
                       edits("* hover.weight = 3")])
    monkeypatch.setattr(command, "_client", lambda spec: llm)
    out = tmp_path / "refine"
    code = cli.main(["refine-reward", "hold the gripper 10 cm above x=0.2, y=0", "--rounds",
                     "3", "--episodes", "1", "--samples", "16", "--max-seconds", "1",
                     "--out", str(out), "--json"])
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert code in (0, 1) and len(report["rounds"]) == 3
    status = [line for line in captured.err.splitlines() if line.startswith("round ")]
    assert [line[:9] for line in status] == ["round 1/3", "round 2/3", "round 3/3"]
    assert "revision failed: RevisionError: not an edit line" in status[1]
    rounds = [json.loads(line) for line in (out / "rounds.jsonl").read_text().splitlines()]
    assert [r["round"] for r in rounds] == [1, 2, 3]
    assert rounds[0]["stats"]["episodes"][0]["sim_seconds"] == pytest.approx(1.0)
    assert rounds[1]["spec"] is None and rounds[1]["error"].startswith("RevisionError")
    assert rounds[2]["changes"] == ["hover.weight 1.0 -> 3.0"] and rounds[2]["llm_seconds"]
    assert "Advice:" in rounds[2]["reflection"]
    best = json.loads((out / "best_spec.json").read_text())
    assert best == report["best_spec"] == rounds[report["best_round"] - 1]["spec"]
    assert llm.requests[3].temperature == RETRY_TEMPERATURE  # after the failed round


def test_a_bench_task_instruction_is_judged_by_the_task(seeded_world):
    seeded_world.reset(SEED)
    task = TASKS["hover"](seeded_world, np.random.default_rng(SEED))
    name, judge = command._bench_judge(seeded_world, task.instruction, SEED)
    assert name == "hover" and judge == task.judge
    assert command._bench_judge(seeded_world, "wave hello", SEED) is None


# ---------------------------------------------------------------- the real local model
@pytest.mark.llm
def test_the_local_model_returns_valid_edits(reach_stats, blocks):
    spec = reach_spec(blocks)
    revision = Reviser(make_client("local"), blocks).revise(
        f"reach the {blocks[0]}", spec, reflection_text(reach_stats))
    assert revision.changes and 1 <= len(revision.edits) <= 3
    assert validate_spec(revision.spec.to_dict(), blocks).spec == revision.spec
