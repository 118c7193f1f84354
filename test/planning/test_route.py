"""Routing instructions to Code as Policies or to Language to Rewards."""

import pytest

from lang2policy.errors import ConfigError, Lang2PolicyError
from lang2policy.planning.route import check_instruction, choose_planner

REWARD = [
    "lift the red block 10 cm", "higher", "a bit lower", "slower", "move slowly",
    "keep the gripper above the blue bowl", "hover 5 cm over the bowl", "avoid the blue bowl",
    "stay away from the red bowl", "push the red block to the left", "turn the block 90 degrees",
    "rotate the green block", "stand the block upright", "put the red block on the bowl gently",
    "move the gripper to x 0.2, y 0.1, 8 cm up", "move the red block 10 cm to the left slowly",
    "move the gripper slowly above the yellow bowl",
]
CODE = [
    "put the red block in the blue bowl", "pick up the red block", "where is the red block?",
    "how many blocks are there", "stack all the blocks", "put the blocks in matching bowls",
    "sort the blocks", "put the red block in the bowl, then the green one", "say hello",
    "now put it back", "",
    "move the red block 10 cm to the left", "shift the blue block a bit closer to the robot",
    "put the red block between the blue bowl and the green bowl",
    "put the blue block to the right of the yellow bowl",
]


@pytest.mark.parametrize("instruction", REWARD)
def test_continuous_and_quantitative_goals_go_to_rewards(instruction):
    assert choose_planner(instruction) == "reward"


@pytest.mark.parametrize("instruction", CODE)
def test_discrete_sequences_and_questions_go_to_code(instruction):
    assert choose_planner(instruction, "auto") == "code"


def test_a_fixed_setting_wins_and_a_bad_one_is_an_error():
    assert choose_planner("lift the red block 10 cm", "code") == "code"
    assert choose_planner("where is it?", "reward") == "reward"
    with pytest.raises(ConfigError, match=r"'rewards' is not one of \['code', 'reward', 'auto'\]"):
        choose_planner("x", "rewards")


def test_instructions_are_checked():
    assert check_instruction("  lift it  ") == "lift it"
    for bad, message in ((None, "empty"), ("  ", "empty"), ("x" * 501, "at most 500"),
                         ("a\x07b", "control characters"), (3, "must be text")):
        with pytest.raises(Lang2PolicyError, match=message):
            check_instruction(bad)
