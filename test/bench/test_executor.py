"""``lang2policy bench executor`` (issue 37): its setups, its report and its verdict; one small
real run (marked slow) on the local pool and on Ray."""

from __future__ import annotations

import argparse

import pytest

from lang2policy.bench import executor
from lang2policy.errors import ConfigError


def row(kind, workers, seconds, steady, digest="d" * 16) -> dict:
    return {"executor": kind, "workers": workers, "episodes": 12, "seconds": seconds,
            "episodes_per_s": round(12 / seconds, 3), "steady_episodes_per_s": steady,
            "digest": digest}  # fmt: skip


def test_setups_are_executor_and_workers_and_anything_else_is_refused():
    assert executor.setups("local:2, ray:1,ray:2") == [("local", 2), ("ray", 1), ("ray", 2)]
    for bad in ("dask:2", "ray", "ray:0", "ray:x", ""):
        with pytest.raises(ConfigError, match="--setups"):
            executor.setups(bad)


def test_the_verdict_is_two_workers_throughput_over_one_and_the_wall_ratio_is_shown():
    args = argparse.Namespace(seed=0)
    rows = [row("local", 2, 20.0, 0.8), row("ray", 1, 40.0, 0.4), row("ray", 2, 24.0, 0.72)]
    report = executor._report(args, ["lift"], [None] * 12, rows)
    assert report["ray_speedup_2_over_1"] == 1.8 and report["passed"]
    assert report["ray_wall_ratio_2_over_1"] == pytest.approx(1.67)
    assert report["same_episodes"] and executor.exit_code(report) == 0
    text = executor.format_text(report)
    assert "1.8x the throughput (target >= 1.7x) PASS" in text and "1.67x" in text
    rows[2] = row("ray", 2, 30.0, 0.6, digest="e" * 16)  # slower, and other episodes
    report = executor._report(args, ["lift"], [None] * 12, rows)
    assert not report["passed"] and not report["same_episodes"]
    assert executor.exit_code(report) == 1 and "same episodes in every setup: NO" in (
        executor.format_text(report)
    )


@pytest.mark.slow
def test_a_small_run_makes_the_same_episodes_on_each_setup():
    pytest.importorskip("ray")
    args = argparse.Namespace(episodes=2, families="lift", seed=1, setups="local:1,ray:1",
                              json=True)  # fmt: skip
    report = executor.run_args(args)
    assert [(r["executor"], r["workers"]) for r in report["rows"]] == [("local", 1), ("ray", 1)]
    assert report["same_episodes"] and report["episodes"] == 2
    assert report["ray_speedup_2_over_1"] is None  # no ray:2 setup, no verdict
