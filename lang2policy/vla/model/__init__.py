"""The VLA network and what it is saved with: its configuration (``config``), the FiLM CNN with
its scene and action-chunk heads (``network``, ``grounding``, ``anchored_head``), the
instruction encoding (``language``, ``slots``), the arm's keyframes by IK (``keyframes``), the
state/action normaliser (``normalize``) and the model directory on disk (``checkpoint``). Both
the runtime policy and training build on it; it imports only ``spec``. Importing a module here
may import torch; importing the wing does not.
"""
