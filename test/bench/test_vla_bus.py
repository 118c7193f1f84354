"""``bench vla --robot so101-hw --emulate --perception camera``: the VLA's episodes on the SO-101
driver over the emulated servo bus, in wall time, judged on the true table
(``bench.vla_bus``)."""

from __future__ import annotations

import argparse

import pytest

from lang2policy.bench.vla import physical_path
from lang2policy.bench.vla_bus import BusRollouts
from lang2policy.errors import ConfigError
from lang2policy.realism import load_realism
from lang2policy.vla.eval.rollout import evaluation_specs
from lang2policy.vla.policy.runtime import VLAPolicy

MODEL = "models/vla-so101-tiny"


def _args(**values) -> argparse.Namespace:
    return argparse.Namespace(**{"robot": "so101-hw", "emulate": True, "perception": "camera",
                                 **values})  # fmt: skip


def test_the_physical_path_flags_go_together():
    assert physical_path(_args()) is True
    assert physical_path(_args(robot="so101", emulate=False, perception="ground_truth")) is False
    for wrong in (dict(emulate=False), dict(perception="ground_truth"), dict(robot="so101")):
        with pytest.raises(ConfigError, match="go together"):
            physical_path(_args(**wrong))
    with pytest.raises(ConfigError, match="so101 or so101-hw"):
        physical_path(_args(robot="panda"))


def test_the_shipped_vla_lifts_a_block_through_the_driver_on_the_emulated_bus():
    spec = next(s for s in evaluation_specs(("lift",), 1, 0) if s.split == "seen")
    policy = VLAPolicy.load(MODEL, device="cpu", threads=1)
    rollouts = BusRollouts(load_realism("off"))
    try:
        requests = rollouts.bus.emulator.stats.requests if rollouts.bus.emulator else 0
        result = rollouts.run(policy, spec)
        assert rollouts.bus.emulator.stats.requests > requests + 100  # driven over the bus
    finally:
        rollouts.close()
    assert result["success"], result["detail"]  # judged on the true table
    assert result["node_started"]  # the node's check found the block on camera perception
    assert result["steps"] >= 10 and len(result["act_s"]) == result["steps"]
