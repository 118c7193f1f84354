"""``bench vla-corrections``'s arguments: each bad value is refused before any episode runs,
with what was wrong (the bench itself runs minutes: ``lang2policy bench vla-corrections``)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from lang2policy.bench.vla_corrections import (
    _check,
    add_arguments,
    evaluation_layouts,
    format_text,
)
from lang2policy.errors import ConfigError


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))


def test_defaults_pass_and_bad_values_say_what_was_wrong(tmp_path: Path):
    _check(parse("--out", str(tmp_path / "new")))
    with pytest.raises(ConfigError, match="--family must be one of"):
        _check(parse("--family", "pick_place", "--out", str(tmp_path / "new")))
    with pytest.raises(ConfigError, match="exists"):
        _check(parse("--out", str(tmp_path)))
    with pytest.raises(ConfigError, match=r"--start must be one of \('rest', 'away'\)"):
        _check(parse("--start", "home", "--out", str(tmp_path / "new")))
    _check(parse("--start", "away", "--out", str(tmp_path / "new")))
    with pytest.raises(ConfigError, match="--mix must be in"):
        _check(parse("--mix", "0", "--out", str(tmp_path / "new")))
    with pytest.raises(ConfigError, match="not a dataset directory"):
        _check(parse("--replay", str(tmp_path), "--out", str(tmp_path / "new")))
    (tmp_path / "demos" / "meta").mkdir(parents=True)
    (tmp_path / "demos" / "meta" / "info.json").write_text("{}")
    _check(parse("--replay", str(tmp_path / "demos"), "--out", str(tmp_path / "new")))
    _check(parse("--eval-seeds", "0", "1", "2", "--out", str(tmp_path / "new")))
    with pytest.raises(ConfigError, match=r"--eval-seeds: each seed once, got \[0, 1, 0\]"):
        _check(parse("--eval-seeds", "0", "1", "0", "--out", str(tmp_path / "new")))


def _report(**changes) -> dict:
    """A push report with 2/3 before and 1/3 after, replaying data/demos; ``changes`` on top."""
    episodes = [{"split": "seen", "success": s, "detail": ""} for s in (True, False, True)]
    report = {
        "family": "push", "model": "models/m", "corrected_episodes": 20, "eval_episodes": 3,
        "seed": 0, "before": 2 / 3, "after": 1 / 3, "points": -33.3, "goal_points": 15.0,
        "replay": ["data/demos"], "mix": 0.5, "dataset": "d", "finetuned_model": "m2",
        "episodes_before": episodes, "episodes_after": [*episodes[1:], episodes[1]],
        "recording": {"succeeded_with_corrections": 4, "corrections": 81, "frames": 3546,
                      "seconds": 61.6},
        "finetuning": {"steps": 300, "wall_time_s": 53.9, "final_train_loss": 0.08,
                       "final_val_loss": 0.26},
        "wall_s": 166.1,
    }  # fmt: skip
    return {**report, **changes}


def test_the_report_names_the_replayed_data_and_the_change_in_points():
    text = format_text(_report())
    assert "replaying data/demos, 0.5 of the frames from the corrections" in text
    assert "before 2/3 (67 %), after 1/3 (33 %): -33.3 points (goal +15)" in text
    assert "arm starting at rest" in text  # reports made before --start: the rest start
    assert "recorded before" not in text and "first correction" not in text


def test_the_report_says_when_corrections_were_reused_and_trimmed():
    recording = {**_report()["recording"], "seconds": 0.0, "reused": "/tmp/c"}
    text = format_text(
        _report(start="away", from_first_correction=True, recording=recording)
    )
    assert "(3546 frames, 0.0 s, recorded before: /tmp/c)" in text
    assert "0.5 of the frames from the corrections), each corrected episode from its first " \
        "correction" in text
    assert "arm starting at away" in text


def test_each_evaluation_seed_draws_its_own_layouts_the_splits_in_turn():
    specs, seeds = evaluation_layouts("lift", 6, [0, 1])
    assert seeds == [0] * 6 + [1] * 6 and len(specs) == 12
    assert [s.split for s in specs[:3]] == ["seen", "unseen combination", "unseen phrasing"]
    assert not {s.seed for s in specs[:6]} & {s.seed for s in specs[6:]}  # other scenes
    alone, _ = evaluation_layouts("lift", 6, [1])
    assert [s.seed for s in alone] == [s.seed for s in specs[6:]]  # a seed's own, as alone


def test_a_report_over_several_seeds_gives_each_seeds_result():
    def run(seed, wins):
        return [{"split": "seen", "success": w, "detail": "", "seed": seed} for w in wins]

    before = run(0, (True, False)) + run(1, (False, False))
    after = run(0, (True, True)) + run(1, (True, False))
    text = format_text(_report(eval_seeds=[0, 1], eval_episodes=4, before=0.25, after=0.75,
                               points=50.0, episodes_before=before, episodes_after=after))
    assert "unseen layouts (4 episodes, seeds 0, 1): before 1/4 (25 %), after 3/4 (75 %)" in text
    assert "seed 0: before 1/2, after 2/2" in text and "seed 1: before 0/2, after 1/2" in text
    assert "seeds" not in format_text(_report())  # one seed: no breakdown
