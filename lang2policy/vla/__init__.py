"""A small vision-language-action policy trained from demonstrations our simulation makes
(issue 17).

- ``schema``: what a frame holds (cameras, state, action, rates): shared by every part.
- ``tasks``, ``scenes``, ``demos``: task families with their phrasings and splits, randomised
  scenes, and the scripted demonstrations recorded from them (``lang2policy record demos``).
- ``dataset``: the LeRobotDataset v3 layout, written and read (``lang2policy dataset ...``).
- ``model``, ``train``, ``policy``: the FiLM CNN with an action-chunk head, its training
  (``lang2policy train vla``) and the runtime policy with temporal ensembling.
- ``rollout``: closed-loop episodes of a policy in simulation (evaluation, ``bench vla``).

The core imports no ROS; the VLA node lives in ``lang2policy.ros``.
"""
