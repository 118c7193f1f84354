"""``lang2policy bench corrections``: the scenarios' specs, and a short run of the benchmark."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lang2policy.bench import corrections_scenarios as bench
from lang2policy.bench.corrections import format_text
from lang2policy.cli import main
from lang2policy.corrections import apply_to_spec, classify, objects_in_spec
from lang2policy.rewards.spec import validate_spec


@pytest.mark.parametrize("name", list(bench.SCENARIOS))
def test_each_scripted_correction_fixes_its_plan_on_paper(world, name):
    """Before any simulation: the correction the person says, applied to the flawed plan,
    removes the mistake (the point is back over the object, the blue block is the target,
    the speed cap is under what the person wants)."""
    scenario = bench.SCENARIOS[name]
    for seed in range(4):
        world.reset(seed, list(scenario.objects))
        setup = scenario.make(world, np.random.default_rng(seed))
        plan = validate_spec(setup.plan, world.present).spec
        judge = validate_spec(setup.judge, world.present, add_defaults=False).spec
        assert judge.conditions and plan.duration > setup.correct_at
        correction = classify(setup.correction, world.present, objects_in_spec(plan))
        fixed = apply_to_spec(correction, plan, world.present).spec
        if name == "offset":
            true = np.array(judge.term("above").params["point"])
            before = np.array(plan.term("above").params["point"])
            after = np.array(fixed.term("above").params["point"])
            assert np.linalg.norm(before - true) == pytest.approx(bench.BIAS)
            assert np.linalg.norm(after - true) == pytest.approx(bench.BIAS - 0.02)
        elif name == "target":
            assert objects_in_spec(plan) == ["red block"]
            assert objects_in_spec(fixed) == ["blue block"]
            red, blue = (world.object_pose(n).position[:2] for n in ("red block", "blue block"))
            assert np.linalg.norm(red - blue) > 0.06  # the 3 cm judge cannot pass at the red one
        else:
            assert fixed.term("speed").params["speed"] < bench.PERSON_SPEED_LIMIT
            assert plan.term("speed").params["speed"] > bench.PERSON_SPEED_LIMIT


def test_bench_offset_scenario_changes_the_outcome(capsys, tmp_path):
    code = main(
        [
            "bench",
            "corrections",
            "--scenarios",
            "offset",
            "--episodes",
            "1",
            "--samples",
            "48",
            "--memory-dir",
            str(tmp_path),
            "--json",
        ]
    )
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["benchmark"] == "corrections" and report["samples"] == 48
    row = report["scenarios"]["offset"]
    assert row["without"] == {"successes": 0, "episodes": 1, "rate": 0.0}
    assert row["with"]["successes"] == 1
    assert row["latency"]["corrected"] == 1 and row["latency"]["responded"] == 1
    assert 0 < row["latency"]["classify_apply_ms_mean"] < 100
    assert 0 < row["latency"]["effect_sim_s_mean"] <= 1.0
    assert row["memory"]["corrections_needed"] == [0]
    assert row["repeat_with_memory"]["successes"] == 1
    assert row["memory"]["recall_score_mean"] >= report["threshold"]
    episode = report["episodes"][0]
    assert episode["without"]["measure"] > 0.02 > episode["with"]["measure"]
    assert episode["repeat"]["recall"]["applied"] == 1
    assert report["embedding"]["encode_calls"] > 0
    log = tmp_path / "offset-0.jsonl"
    assert [json.loads(line)["kind"] for line in log.read_text().splitlines()] == ["offset"]
    text = format_text(report)
    assert "offset" in text and "corrections left" in text


def test_bench_rejects_unknown_scenarios_and_bad_flags(capsys):
    assert main(["bench", "corrections", "--scenarios", "juggle"]) == 2
    assert "valid scenarios" in capsys.readouterr().err
    assert main(["bench", "corrections", "--episodes", "0"]) == 2
    assert "--episodes" in capsys.readouterr().err


def test_code_plan_corrections_go_through_the_gate(capsys):
    """The code-plan track: a legitimate offset works, an edit past the workspace is refused
    and the tool stays inside (measured every physics step)."""
    code = main(
        [
            "bench",
            "corrections",
            "--plans",
            "code",
            "--scenarios",
            "offset,beyond-workspace",
            "--episodes",
            "1",
            "--json",
        ]
    )
    assert code == 0
    report = json.loads(capsys.readouterr().out)["code_plans"]
    offset, beyond = report["offset"], report["beyond-workspace"]
    assert (offset["without"], offset["with"]) == (0, 1)
    assert offset["rows"][0]["with"]["accepted"] == ["offset 3.0 cm left"]
    assert beyond["with"] == 1 and beyond["rows"][0]["with"]["refused"]
    assert beyond["rows"][0]["with"]["max_tool"] <= 0.353
    assert main(["bench", "corrections", "--plans", "dance"]) == 2
