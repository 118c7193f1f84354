"""Fixtures of the RL tests."""

import pytest


@pytest.fixture(scope="module")
def lift_env():
    """The lift family's environment, starting anywhere (not near the goal)."""
    from lang2policy.rl.env import RewardEnv
    from lang2policy.rl.families import family

    return RewardEnv(family("lift"), seed=0, near_start=0.0)
