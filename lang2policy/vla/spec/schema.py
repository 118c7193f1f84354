"""What one recorded frame holds, shared by the demonstrations, the dataset, the model and the
policy at run time (issue 17).

A frame is taken every ``1 / FPS`` s of simulated time:

- ``observation.images.<camera>``: an RGB image (``IMAGE_SIZE`` square, uint8) from each camera
  of ``CAMERAS`` (the fixed front camera and the wrist camera);
- ``observation.state``: the measured arm joints (rad) and the gripper opening (0 closed ..
  1 open), ``STATE_NAMES``;
- ``action``: the commanded joint position targets and gripper opening in force *until the
  next frame* (the target the arm is sent towards over the next ``1 / FPS`` s), same names;
- ``sim.environment_state`` (simulated demonstrations only; ``observation.environment_state``
  in datasets written before, the name LeRobot's ACT would take as an input): where the named block
  is and where the task wants it (``environment_state``), a training target, never an input;
- the task: the instruction as a person would type it (one of several phrasings).

Actions are absolute joint targets, as the SO-101's leader arm gives them in LeRobot's own
datasets, so a recording from the real arm has the same meaning.
"""

from __future__ import annotations

FPS = 10  # frames (and policy actions) per second
IMAGE_SIZE = 96  # pixels, square
CAMERAS = ("front", "wrist")
JOINT_NAMES = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll")
STATE_NAMES = (*JOINT_NAMES, "gripper")
STATE_DIM = len(STATE_NAMES)
ACTION_DIM = len(STATE_NAMES)
ROBOT_TYPE = "so101"


def image_key(camera: str) -> str:
    """The LeRobot feature name of a camera's images."""
    return f"observation.images.{camera}"


STATE_KEY = "observation.state"
ACTION_KEY = "action"
# Optional: privileged scene state of simulated demonstrations (``environment_state``), an
# auxiliary training target; recordings of the real arm have none. The name the model's
# normaliser keeps it under (and that datasets written before had):
ENV_KEY = "observation.environment_state"
# The dataset feature it is written as: a name LeRobot's policies skip (its
# ``dataset_to_policy_features`` takes every "observation..." key as an input, and
# ``observation.environment_state`` as ACT's scene input, which a real arm cannot give).
SIM_ENV_KEY = "sim.environment_state"


def environment_key(features) -> str | None:
    """The dataset feature holding the scene state: ``SIM_ENV_KEY``, or ``ENV_KEY`` in a
    dataset written before; None when there is none (a recording of the real arm)."""
    return next((key for key in (SIM_ENV_KEY, ENV_KEY) if key in features), None)
