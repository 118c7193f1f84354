"""``lang2policy.parallel.executor``: where the worker processes run (issue 37). Fast: the
command line's choices and refusals, the local pool's order, and a missing Ray named with the
extra to install. Real Ray runs are in test_ray_executor.py (marked slow)."""

from __future__ import annotations

import argparse
import operator
import sys

import pytest

from lang2policy.errors import ConfigError
from lang2policy.parallel.executor import Executor, add_arguments, from_args, run_ordered


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=2)
    add_arguments(parser)
    return parser.parse_args(list(argv))


def test_local_is_the_default_and_ray_is_chosen_by_flag():
    assert from_args(parse()) == Executor("local", 2, None)
    assert from_args(parse("--executor", "ray", "--workers", "3")) == Executor("ray", 3, None)
    chosen = from_args(parse("--executor", "ray", "--ray-address", "127.0.0.1:6379"))
    assert chosen.address == "127.0.0.1:6379"
    assert Executor("ray", 1, "auto").address == "auto"
    assert Executor("ray", 1, "ray://10.0.0.5:10001").address.startswith("ray://")


def test_an_unknown_executor_is_refused_by_the_parser_naming_the_choices(capsys):
    with pytest.raises(SystemExit):
        parse("--executor", "dask")
    said = capsys.readouterr().err
    assert "argument --executor: invalid choice: 'dask'" in said
    assert "local" in said.split("choose from")[1] and "ray" in said.split("choose from")[1]
    with pytest.raises(ConfigError, match="--executor must be one of local, ray"):
        Executor("threads")


@pytest.mark.parametrize("address", ["", "nohost", "host:", ":6379", "host:99999", "a b:1"])
def test_a_bad_ray_address_is_refused_saying_what_is_allowed(address):
    with pytest.raises(ConfigError, match="--ray-address must be HOST:PORT"):
        from_args(parse("--executor", "ray", "--ray-address", address))


def test_a_ray_address_without_the_ray_executor_and_a_ray_cluster_of_no_cpus_are_refused():
    with pytest.raises(ConfigError, match="--ray-address goes with --executor ray"):
        from_args(parse("--ray-address", "127.0.0.1:6379"))
    with pytest.raises(ConfigError, match="--executor ray needs --workers of at least 1"):
        from_args(parse("--executor", "ray", "--workers", "0"))


def test_the_commands_take_the_executor_flags():
    from lang2policy.cli import build_parser

    parser = build_parser()
    demos = parser.parse_args(["record", "demos", "--out", "x", "--executor", "ray",
                               "--ray-address", "127.0.0.1:6379"])  # fmt: skip
    assert (demos.executor, demos.ray_address) == ("ray", "127.0.0.1:6379")
    bench = parser.parse_args(["bench", "vla", "--executor", "ray"])
    assert bench.executor == "ray" and bench.ray_address is None


def test_the_local_pool_and_this_process_give_the_results_in_the_items_order():
    items = [3, 0, 2, 1, 4]
    want = ["ab" * n for n in items]
    for workers in (0, 2):  # builtins: picklable by reference for the spawned workers
        got = list(run_ordered(Executor("local", workers), str, ("ab",), operator.mul, items))
        assert got == want


def test_without_ray_the_run_says_which_extra_to_install(monkeypatch):
    from lang2policy.parallel import ray_executor

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    monkeypatch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # restored afterwards
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    with pytest.raises(ConfigError, match=r"install the ray extra: pip install -e \.\[ray\]"):
        list(run_ordered(Executor("ray", 1), str, ("ab",), operator.mul, [1]))
    assert "pip install -e .[ray]" in ray_executor.INSTALL_HINT
