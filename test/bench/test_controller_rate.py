"""``lang2policy bench controller-rate``: the rate arithmetic (pure) and one short real run of
the graph (sim node, controller node, probe: processes on loopback DDS) that must end with every
process exiting cleanly and both rates measured."""

from __future__ import annotations

import argparse
import os

import pytest

from lang2policy.bench import controller_rate
from lang2policy.bench.registry import BENCHES
from lang2policy.rewards.spec import validate_spec
from lang2policy.scene.world import World


def test_the_rate_is_iterations_over_wall_time_between_statuses():
    samples = [[10.0, 100, 40.0, 20.0], [10.5, 120, 41.0, 21.0], [12.0, 180, 39.0, 22.0]]
    summary = controller_rate.summarize({"samples": samples, "error": None}, {"sim_node": 0})
    assert summary["rate_hz"] == pytest.approx(40.0)
    assert summary["reported_rate_hz_median"] == 40.0 and summary["plan_ms_median"] == 21.0
    empty = controller_rate.summarize({"samples": [], "error": "no objects"}, {})
    assert empty["rate_hz"] != empty["rate_hz"] and empty["error"] == "no objects"  # NaN


def test_the_spec_is_valid_and_outlasts_the_window():
    world = World("so101")
    world.reset(0)
    spec = validate_spec(controller_rate.rate_spec(10.0), world.present).spec
    assert spec.duration > 10.0 and not spec.conditions


def test_the_command_is_registered_and_fails_below_the_bar():
    bench = BENCHES["controller-rate"]
    parser = argparse.ArgumentParser()
    bench.configure(parser)
    args = parser.parse_args(["--seconds", "2", "--json"])
    assert args.seconds == 2.0 and not args.in_process
    assert bench.exit_code({"ok": False}) == 1 and bench.exit_code({"ok": True}) == 0


@pytest.mark.ros
def test_a_short_run_measures_both_rates_and_every_node_exits_cleanly():
    pytest.importorskip("rclpy")
    domain = 1 + (os.getpid() + 97) % 200
    report = controller_rate.controller_rate_in_graph_vs_standalone(
        seconds=3.0, samples=16, threads=1, domain_id=domain
    )
    graph = report["in_graph"]
    assert graph["error"] is None, report
    assert graph["rate_hz"] > 0 and report["standalone"]["rate_hz"] > 0, report
    assert graph["exit_codes"] == {"sim_node": 0, "controller_node": 0, "probe": 0}, report
    assert report["ratio"] is not None
    assert "controller planning rate" in controller_rate.format_text(report)
