"""The lang2policy command: benchmarks print JSON with the promised fields; errors are clear."""

import json

import pytest

from lang2policy.cli import main


def test_bench_sim_json(capsys):
    assert main(["bench", "sim", "--seconds", "0.5", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    for key in (
        "physics_steps_per_s",
        "realtime_factor",
        "render_fps",
        "baseline_no_sleep_steps_per_s",
    ):
        assert report[key] > 0


def test_bench_pickplace_json(capsys):
    assert main(["bench", "pickplace", "--episodes", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["episodes"] == 1 and report["success_rate"] == 1.0


def test_bad_arguments_give_a_clear_error(capsys):
    assert main(["bench", "pickplace", "--episodes", "0"]) == 2
    assert "--episodes must be at least 1" in capsys.readouterr().err
    assert main(["bench", "sim", "--robot", "r2d2", "--seconds", "1"]) == 2
    assert "available robots" in capsys.readouterr().err


def test_demo_writes_a_video(tmp_path, capsys):
    out = tmp_path / "demo.mp4"
    assert main(["demo", "--scripted", "--out", str(out)]) == 0
    assert out.stat().st_size > 10_000
    assert "wrote" in capsys.readouterr().out


def test_exec_policy_runs_a_program_and_reports_the_scene(tmp_path, capsys):
    program = tmp_path / "plan.py"
    program.write_text('put_first_on_second("red block", "blue bowl")\nsay("done")\n')
    objects = "red block,blue bowl,green block"
    assert main(["exec-policy", str(program), "--objects", objects, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["outcome"]["kind"] == "ok"
    assert [i["skill"] for i in report["outcome"]["intents"]] == ["put_first_on_second", "say"]
    assert "red block in blue bowl" in report["scene"]["relations"]
    assert report["outcome"]["layers"]["seccomp"] == "on"


def test_exec_policy_denied_plan_exits_1_with_the_reason(tmp_path, capsys):
    program = tmp_path / "plan.py"
    program.write_text("move_to([0.9, 0.0, 0.1])\n")
    assert main(["exec-policy", str(program), "--objects", "red block"]) == 1
    out = capsys.readouterr().out
    assert "denied" in out and "outside zone 'workspace'" in out


def test_exec_policy_with_a_narrowing_policy_file(tmp_path, capsys):
    program = tmp_path / "plan.py"
    program.write_text('pick("red block")\n')
    narrow = tmp_path / "narrow.yaml"
    narrow.write_text(
        "version: 1\nrules:\n  - {id: only-bowls, skill: get_obj_names, effect: allow}\n"
    )
    args = ["exec-policy", str(program), "--narrow", str(narrow), "--objects", "red block"]
    assert main([*args, "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["outcome"]["kind"] == "denied"
    assert report["outcome"]["intents"][0]["decision"] == "denied"


def test_exec_policy_bad_inputs(tmp_path, capsys):
    assert main(["exec-policy", str(tmp_path / "missing.py")]) == 2
    assert "cannot read policy file" in capsys.readouterr().err
    bad_policy = tmp_path / "rules.yaml"
    bad_policy.write_text("version: 1\nrules:\n  - {id: x, skill: fly, effect: allow}\n")
    program = tmp_path / "plan.py"
    program.write_text("pass\n")
    assert main(["exec-policy", str(program), "--policy", str(bad_policy)]) == 2
    assert "fly" in capsys.readouterr().err


def test_bench_intents_json(capsys):
    assert main(["bench", "intents", "--calls", "50", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    for path in ("direct", "gated", "sandboxed"):
        assert report[path]["calls"] == 50
        assert 0 < report[path]["median_us"] <= report[path]["p99_us"]
    assert report["startup_ms"]["runs"] == 10


REPLAY = "replay:test/fixtures/llm/cap_session.jsonl"  # recorded from the local Gemma model
UNGROUNDED = ("--grounding", "off")  # the prompts the fixture was recorded with


def test_run_plans_and_executes_an_instruction_from_replayed_llm_answers(capsys, tmp_path):
    objects = "red block,blue block,blue bowl,green bowl"
    video = tmp_path / "run.mp4"
    args = ["run", "put the red block in the blue bowl", "--objects", objects, "--seed", "1"]
    assert main([*args, "--llm", REPLAY, *UNGROUNDED, "--video", str(video), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["result"]["outcome"]["kind"] == "ok"
    assert report["result"]["verdict"] == "goal_reached"
    assert "put_first_on_second" in report["result"]["program"]["code"]
    assert "red block in blue bowl" in report["scene"]["relations"]
    assert video.stat().st_size > 10_000


def test_run_rejects_bad_instructions_and_reports_llm_misses(capsys):
    assert main(["run", "   ", "--llm", REPLAY]) == 2
    assert "instruction is empty" in capsys.readouterr().err
    backflip = ["run", "do a backflip", "--objects", "red block"]
    assert main([*backflip, "--llm", REPLAY, *UNGROUNDED]) == 1
    out = capsys.readouterr().out
    assert "rejected" in out and "LLM call failed" in out


def test_bench_cap_oracle_track_json(capsys):
    args = ["bench", "cap", "--episodes", "1", "--families", "pick_place,corner", "--json"]
    assert main(args) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["tracks"] == ["oracle"]
    assert report["oracle"]["episodes"] == 2
    assert [f["family"] for f in report["families"]] == ["pick_place", "corner"]


# Recorded from the local Gemma model with grammar-constrained decoding:
#   lang2policy run "lift the red block 10 cm" "higher" --route reward --seed 1 --duration 1 \
#     --objects "red block,blue bowl,green block" --llm record:test/fixtures/llm/l2r_cli.jsonl
# (the follow-up's prompt holds the object positions after the first step: record it again if
# the MPC starts moving the blocks in that second)
L2R_REPLAY = "replay:test/fixtures/llm/l2r_cli.jsonl"
L2R_ARGS = ["--objects", "red block,blue bowl,green block", "--seed", "1", "--duration", "1"]


def test_run_reward_plans_a_spec_runs_the_mpc_and_a_follow_up_edits_it(capsys, tmp_path):
    video = tmp_path / "l2r.mp4"
    args = ["run", "lift the red block 10 cm", "higher", "--route", "reward", *L2R_ARGS]
    code = main([*args, "--llm", L2R_REPLAY, "--video", str(video), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == (0 if report["ok"] else 1)
    assert report["route"] == "reward" and report["instructions"] == ["lift the red block 10 cm",
                                                                         "higher"]
    first, second = report["steps"]
    lift = {t["id"]: t for t in first["plan"]["spec"]["terms"]}["lift"]
    assert lift["params"] == {"object": "red block", "height": 0.1, "mode": "exactly"}
    assert first["plan"]["new_task"] and not second["plan"]["new_task"]
    higher = {t["id"]: t for t in second["plan"]["spec"]["terms"]}["lift"]
    assert higher["params"]["height"] > 0.1
    assert "set_lift" in first["plan"]["code"] and "* This is not a new task." in (
        second["plan"]["description"])
    for step in report["steps"]:  # both ran on the world, for the capped duration
        assert step["outcome"]["status"] in ("success", "timeout", "failed")
        assert 0.5 < step["outcome"]["sim_seconds"] <= 1.05
        assert step["outcome"]["iterations"] >= 5 and "lift" in step["outcome"]["final"]
        assert step["plan"]["plan_ms"] > 0 and step["plan"]["notes"] == []
    assert set(report["scene"]["positions"]) == {"red block", "blue bowl", "green block"}
    assert video.stat().st_size > 10_000


def test_run_auto_routes_to_rewards_and_reports_planning_failures(capsys):
    args = ["run", "lift the red block 10 cm", "spin around", "--route", "auto", *L2R_ARGS]
    assert main([*args, "--llm", L2R_REPLAY]) == 1
    out = capsys.readouterr().out
    assert "instruction: lift the red block 10 cm" in out and "set_lift" in out
    assert "instruction: spin around" in out and "not planned: ReplayMissError" in out
    assert main(["run", "lift it", "--route", "reward", "--duration", "0"]) == 2
    assert "duration must be a positive number" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["run", "lift it", "--route", "rewards"])
    assert "invalid choice" in capsys.readouterr().err


def test_run_reward_puts_the_objects_an_instruction_names_on_the_table(capsys, tmp_path):
    empty = tmp_path / "empty.jsonl"  # no answers: planning fails, the scene is still built
    empty.write_text("")
    args = ["run", "lift the red block 10 cm", "--route", "reward", "--seed", "0"]
    assert main([*args, "--llm", f"replay:{empty}", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert "red block" in report["objects"] and len(report["objects"]) == 5
    assert report["steps"][0]["error"].startswith("ReplayMissError")
