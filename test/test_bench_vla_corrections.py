"""``bench vla-corrections``'s arguments: each bad value is refused before any episode runs,
with what was wrong (the bench itself runs minutes: ``lang2policy bench vla-corrections``)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from lang2policy.bench.vla_corrections import _check, add_arguments, format_text
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


def test_the_report_names_the_replayed_data_and_the_change_in_points():
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
    text = format_text(report)
    assert "replaying data/demos, 0.5 of the frames from the corrections" in text
    assert "before 2/3 (67 %), after 1/3 (33 %): -33.3 points (goal +15)" in text
    assert "arm starting at rest" in text  # reports made before --start: the rest start


def test_the_report_says_when_corrections_were_reused_and_trimmed():
    episodes = [{"split": "seen", "success": True, "detail": ""}]
    report = {
        "family": "lift", "model": "models/m", "corrected_episodes": 300, "eval_episodes": 1,
        "seed": 0, "before": 0.0, "after": 1.0, "points": 100.0, "goal_points": 15.0,
        "replay": [], "mix": None, "dataset": "d", "finetuned_model": "m2", "start": "away",
        "from_first_correction": True,
        "episodes_before": [{**episodes[0], "success": False}], "episodes_after": episodes,
        "recording": {"succeeded_with_corrections": 115, "corrections": 2223, "frames": 48375,
                      "seconds": 0.0, "reused": "/tmp/c"},
        "finetuning": {"steps": 10, "wall_time_s": 1.0, "final_train_loss": 0.1,
                       "final_val_loss": 0.2},
        "wall_s": 10.0,
    }  # fmt: skip
    text = format_text(report)
    assert "recorded before: /tmp/c" in text
    assert "each corrected episode from its first correction" in text
    assert "arm starting at away" in text
