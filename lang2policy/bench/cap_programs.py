"""Shared helpers of the reference programs of the Code-as-Policies tabletop tasks (the oracle
track), and ``program`` that puts a task's program together with the helpers it needs.
"""

from __future__ import annotations

import textwrap

from lang2policy.scene.robot_description import RobotDescription

# Shared helpers of the reference programs. Setting a block down with move_to + open_gripper
# (let_go_at) puts it where asked to within a few millimetres.
HELPERS = '''
def size_of(obj):
    box = get_bbox(obj)
    return box[1] - box[0]


def let_go_at(block, goal):
    """Lower the held block until its centre is at goal, let go, back off upwards."""
    above = goal + np.array([0.0, 0.0, 0.04])
    move_to(above)
    hang = get_obj_pos(block)[2] - get_ee_pos()[2]
    move_to(goal - np.array([0.0, 0.0, hang]))
    open_gripper()
    move_to(above)


def put_at(block, point):
    """Put the block down on the table with its centre at point's x, y."""
    pick(block)
    let_go_at(block, np.array([point[0], point[1], size_of(block)[2] / 2 + 0.004]))
'''
STACK_BY_PLACE = '''

def put_on_top(block, base):
    """Stack the block on base."""
    put_first_on_second(block, base)
'''
STACK_BY_LOWERING = '''

def put_on_top(block, base):
    """Stack the block on base, centred: lower it onto base with move_to and let go."""
    pick(block)
    top = get_bbox(base)[1][2]
    centre = get_obj_pos(base)
    let_go_at(block, np.array([centre[0], centre[1], top + size_of(block)[2] / 2 + 0.004]))
'''
# Arms on which put_first_on_second(block, other_block) leaves the block too far off-centre for
# a tower to stand: on SO-101 the held block hangs ~1.3 cm off the tool point (towards the fixed
# jaw) and place() turns the wrist a quarter turn from move_to's yaw, so blocks land 1-2 cm off
# (4 of 12 two-block stacks stood); lowering with move_to stands 10 of 10 three-block towers.
# On a Panda put_first_on_second stacks well and the move_to route knocks towers over.
STACK_BY_LOWERING_ARMS = frozenset({"so101"})


def program(body: str, helpers: bool = False, description: RobotDescription | None = None) -> str:
    code = textwrap.dedent(body).strip() + "\n"
    if not helpers:
        return code
    text = HELPERS
    if description is not None:
        lowering = description.name in STACK_BY_LOWERING_ARMS
        text += STACK_BY_LOWERING if lowering else STACK_BY_PLACE
    return text.lstrip() + "\n\n" + code
