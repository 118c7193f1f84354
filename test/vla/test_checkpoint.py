"""The shipped VLA checkpoint (issue 17): ``models/vla-so101-tiny`` loads offline, is small,
says how it was made, and drives the simulated arm in a short closed-loop episode."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from lang2policy.vla.eval.rollout import EVAL_SEED_BASE, RolloutRunner
from lang2policy.vla.sim.episodes import EpisodeSpec
from lang2policy.vla.spec.tasks import Task

MODEL = Path(__file__).resolve().parents[2] / "models" / "vla-so101-tiny"
FILES = ("config.json", "model.safetensors", "normalization.json", "MODEL_CARD.md")


def test_the_checkpoint_is_complete_small_and_documented():
    for name in FILES:
        assert (MODEL / name).is_file(), name
    shipped = [p for p in MODEL.iterdir() if p.is_file() and p.name != "checkpoint.pt"]
    size = sum(p.stat().st_size for p in shipped)  # checkpoint.pt: a local run's, not shipped
    assert size <= 20 * 2**20, f"{size / 2**20:.1f} MB"
    config = json.loads((MODEL / "config.json").read_text())
    assert config["cameras"] == ["front"] and config["image_size"] == 96
    assert config["scene_latch"] and config["keyframes"] and config["grounding"]
    card = (MODEL / "MODEL_CARD.md").read_text()
    assert "lang2policy record demos" in card and "lang2policy train vla" in card


def test_the_checkpoint_lifts_the_named_block_in_a_closed_loop_episode(monkeypatch):
    from lang2policy.vla.policy.runtime import VLAPolicy

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # loading needs no network
    policy = VLAPolicy.load(MODEL, device="cpu", threads=1)
    runner = RolloutRunner()
    spec = EpisodeSpec(0, Task("lift", "red block"), 0, seed=EVAL_SEED_BASE + 17)
    start = runner.session.robot.get_observation().position.copy()
    short = runner.run(policy, spec, max_seconds=3.0)
    moved = np.abs(runner.session.robot.get_observation().position - start)[:-1].max()
    assert 30 <= len(short.act_seconds) <= 31  # 10 actions per simulated second
    assert moved > 0.05, f"the arm moved only {moved:.3f} rad in 3 s"
    result = runner.run(policy, spec)  # the same scene again, to the end
    assert result.success, result.detail
    assert np.linalg.norm(result.block_errors_mm[0]) < 20.0  # its look found the red block


def test_bench_vla_reports_policy_and_oracle_per_split_with_latency_and_a_video(tmp_path):
    import argparse

    from lang2policy.bench import vla

    args = argparse.Namespace(model=MODEL, per_split=1, families=["lift"], seed=3, workers=1,
                              video=tmp_path / "vla.mp4", json=True)  # fmt: skip
    report = vla.run_args(args)
    assert [row["split"] for row in report["rows"]] == list(vla.TARGETS)
    assert all(row["episodes"] == 1 and row["oracle"] == 1 for row in report["rows"]), report
    assert report["latency_one_core"]["calls"] == 300 and report["latency_one_core"]["p50_ms"] > 0
    assert (tmp_path / "vla.mp4").stat().st_size > 1000
    text = vla.format_text(report)
    assert "unseen phrasing" in text and "actions/s" in text
    assert all(row["block_error_mm"] > 0 for row in report["rows"])  # its scene head's error
    assert "mm off (median)" in text and "TRUE scene" not in text


def test_bench_vla_can_feed_the_action_head_the_true_scene_for_diagnosis(tmp_path):
    import argparse

    from lang2policy.bench import vla

    args = argparse.Namespace(model=MODEL, per_split=1, families=["lift"], seed=3, workers=1,
                              video=None, json=True, true_scene=True)  # fmt: skip
    report = vla.run_args(args)
    assert report["true_scene"] and len(report["episodes"]) == 3
    assert "action head fed the TRUE scene state" in vla.format_text(report)


def test_bench_vla_takes_an_mp4_video_or_none_and_refuses_anything_else():
    import argparse

    from lang2policy.bench import vla

    parser = argparse.ArgumentParser()
    vla.add_arguments(parser)
    assert parser.parse_args(["--video", "none"]).video is None
    assert parser.parse_args(["--video", ""]).video is None
    assert str(parser.parse_args(["--video", "out/a.mp4"]).video) == "out/a.mp4"
    with pytest.raises(SystemExit):  # a folder: refused before any episode runs
        parser.parse_args(["--video", "out"])


def test_bench_vla_runs_the_same_episodes_under_each_realism_level():
    import argparse

    from lang2policy.bench import vla
    from lang2policy.errors import ConfigError

    args = argparse.Namespace(model=MODEL, per_split=1, families=["lift"], seed=3, workers=1,
                              video=None, json=True, realism="off,mild")  # fmt: skip
    report = vla.run_args(args)
    assert report["realism"] == ["off", "mild"]
    assert [(r["realism"], r["split"]) for r in report["rows"]] == [
        (level, split) for level in ("off", "mild") for split in vla.TARGETS
    ]
    mild = [r for r in report["rows"] if r["realism"] == "mild"]
    assert [r["target"] for r in mild] == list(vla.REALISM_TARGETS.values())
    assert all(r["oracle"] == 1 for r in report["rows"])  # the same feasible scenes
    episodes = {level: [e["instruction"] for e in report["episodes"] if e["realism"] == level]
                for level in ("off", "mild")}  # fmt: skip
    assert episodes["off"] == episodes["mild"] and len(episodes["off"]) == 3
    assert "mild  lift" in vla.format_text(report)
    with pytest.raises(ConfigError, match="allowed: off, mild, hard"):
        vla.realism_levels("off,dim")
