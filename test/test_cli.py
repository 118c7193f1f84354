"""The lang2policy command: benchmarks print JSON with the promised fields; errors are clear."""

import json

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
    assert main(["demo", "--out", str(out)]) == 0
    assert out.stat().st_size > 10_000
    assert "wrote" in capsys.readouterr().out
