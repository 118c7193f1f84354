"""The trained RL policies the RL tests need, or a skip that says how to make them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lang2policy.paths import share_dir
from lang2policy.rl.policy_file import CONFIG_FILE

REACH_POLICY = Path(os.environ.get("LANG2POLICY_TEST_RL_REACH",
                                   share_dir() / "models" / "rl-reach-so101"))


def trained_reach_policy() -> Path:
    """The trained reach policy's directory, or a skip that says what is missing."""
    if not (REACH_POLICY / CONFIG_FILE).is_file():
        pytest.skip(f"no trained reach policy at {REACH_POLICY} (train one with "
                    "'lang2policy train rl --family reach')")
    return REACH_POLICY
