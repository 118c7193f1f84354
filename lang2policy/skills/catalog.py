"""The robot API that policy code sees: every skill, its arguments and what it returns.

Positions are numpy arrays [x, y, z] in metres in the world frame: the robot's base is at the
origin, +x points away from the robot across the table, +y to the robot's left, +z up, and the
table top is z = 0. "top" of the table is the far side (+x), "left" is +y, as seen from the
robot. ``prompt_api()`` renders these definitions as the API section of an LLM prompt.

``vla_skill`` (a language skill run by the learned VLA policy, issue 18) is in ``SKILLS`` (the
sandbox runs it, policy files may name it) but a prompt lists it only where a VLA can run it
(``prompt_api(vla=True)``): ``PROMPT_SKILLS`` is the API every prompt and grammar offers.
"""

from __future__ import annotations

from lang2policy.skills.spec import Param, Skill
from lang2policy.skills.vla_call import VLA_SKILL

CORNERS = (
    "top left",
    "top right",
    "bottom left",
    "bottom right",
    "center",
    "top",
    "bottom",
    "left",
    "right",
)

_SPEED = Param(
    "speed",
    "number",
    "tool speed in m/s",
    default=0.15,
    minimum=0.01,
    maximum=0.5,
)
_OBJ = Param("obj", "object", "e.g. 'red block'")


def _query(name: str, params: tuple[Param, ...], returns: str, doc: str) -> Skill:
    return Skill(name, "query", params, returns, doc)


def _motion(name: str, params: tuple[Param, ...], doc: str) -> Skill:
    return Skill(name, "motion", params, "none", doc)


_SKILLS = (
    _query(
        "get_obj_names",
        (),
        "names",
        "Names of the objects on the table, e.g. "
        "['red block', 'blue bowl'] (colour + 'block' or 'bowl').",
    ),
    _query(
        "get_obj_pos", (_OBJ,), "point", "Centre of the object as np.array([x, y, z]) in metres."
    ),
    _query(
        "get_bbox",
        (_OBJ,),
        "bbox",
        "Axis-aligned bounding box of the object: np.array([[xmin, ymin, zmin], "
        "[xmax, ymax, zmax]]) in metres.",
    ),
    _query(
        "is_obj_visible",
        (Param("obj", "string", "any object name"),),
        "bool",
        "True if an object with that name is on the table.",
    ),
    _query(
        "get_ee_pose",
        (),
        "pose",
        "Pose of the gripper: {'position': np.array([x, y, z]), 'quaternion': "
        "np.array([w, x, y, z])}.",
    ),
    _query("get_ee_pos", (), "point", "Position of the gripper as np.array([x, y, z])."),
    _query(
        "get_table_bounds",
        (),
        "bounds",
        "The working area of the table: np.array([[xmin, ymin], [xmax, ymax]]) in metres "
        "(its far corners may be out of reach; use get_corner_pos for reachable spots).",
    ),
    _query(
        "get_corner_pos",
        (Param("corner", "string", "which corner, side or the centre", choices=CORNERS),),
        "point",
        "A corner, side midpoint or the centre of the reachable table area, at table height "
        "(z = 0). 'top' is the far side (+x), 'left' is +y, as seen from the robot.",
    ),
    _motion(
        "move_to",
        (Param("position", "point", "target [x, y, z] in metres"), _SPEED),
        "Move the gripper (pointing down) to a position.",
    ),
    _motion(
        "pick", (_OBJ, _SPEED), "Grasp a block from above and lift it (bowls cannot be picked)."
    ),
    _motion(
        "place",
        (Param("target", "place", "an object name, or a position [x, y, z]"), _SPEED),
        "Put the held block on/in the target object, or down on the table at the target "
        "position's x, y (its z is ignored); then let go.",
    ),
    _motion(
        "put_first_on_second",
        (_OBJ, Param("target", "place", "an object name, or a position [x, y, z]"), _SPEED),
        "Pick obj and place it on/in the target object, or on the table at the target "
        "position's x, y.",
    ),
    _motion(
        "push",
        (_OBJ, Param("target", "point", "where the object's centre should end"), _SPEED),
        "Slide the object along the table so that its centre ends at the target's x, y "
        "(z is ignored; the pushing itself is slow, at most 0.05 m/s).",
    ),
    _motion("open_gripper", (), "Open the gripper (lets go of a held object)."),
    _motion("close_gripper", (), "Close the gripper."),
    _motion("go_home", (_SPEED,), "Move the arm back to its home posture."),
    Skill(
        "say",
        "speech",
        (Param("text", "string", "what to say", max_length=500),),
        "none",
        "Tell the user something (shown on their terminal).",
    ),
)

# The VLA skill: the learned policy acts on its own until its success check holds or its time
# budget ends. Its ranges here are sanity bounds; the privilege policy sets the real limits
# (config/policies/default.yaml: rule vla-skill).
_VLA = Skill(
    VLA_SKILL,
    "motion",
    (
        Param(
            "instruction",
            "string",
            "a skill the VLA was trained on, e.g. 'lift the red block', 'put the red block in "
            "the blue bowl', 'push the green block to the left'",
            max_length=300,
        ),
        Param("time_budget_s", "number", "seconds the skill may run", 30.0, 1.0, 600.0),
        Param("max_joint_speed", "number", "cap on every joint's speed, rad/s", 1.0, 0.05, 5.0),
    ),
    "bool",
    "Run a learned skill (the VLA policy) to its end; True when its success check held (it "
    "often fails: check, and fall back to the other skills).",
)

SKILLS: dict[str, Skill] = {skill.name: skill for skill in (*_SKILLS, _VLA)}
PROMPT_SKILLS: dict[str, Skill] = {n: s for n, s in SKILLS.items() if n != VLA_SKILL}


def prompt_api(vla: bool = False) -> str:
    """Python stubs of every skill with docstrings: the API section of an LLM prompt
    (``vla_skill`` too when ``vla``: a VLA can run it)."""
    blocks = []
    for skill in (SKILLS if vla else PROMPT_SKILLS).values():
        lines = [f"def {skill.signature()}:", f'    """{skill.doc}']
        for param in skill.params:
            lines.append(f"    {param.name}: {param.doc}; {param.allowed()}.")
        lines[-1] += '"""'
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)
