"""A small vision-language-action policy trained from demonstrations our simulation makes
(issue 17).

- ``schema``: what a frame holds (cameras, state, action, rates): shared by every part.
- ``tasks``, ``scenes``, ``demos``: task families with their phrasings and splits, randomised
  scenes, and the scripted demonstrations recorded from them (``lang2policy record demos``);
  ``environment_state``: the scene state recorded beside each frame (a training target);
  ``scene_views``: one-frame labelled layouts for the scene head (``--views``).
- ``dataset``: the LeRobotDataset v3 layout, written and read (``lang2policy dataset ...``).
- ``model``, ``normalize``, ``train``, ``policy``: the FiLM CNN with a scene head and an
  action-chunk head, its normalisation (delta actions), its training (``lang2policy train
  vla``) and the runtime policy with temporal ensembling.
- ``skill_parse``, ``skill_actor``, ``skill_judge``, ``skill_runner``, ``backends``: running a
  language skill at 10 Hz with any policy backend (local, openpi, OpenVLA), for the VLA node
  (issue 18).
- ``rollout``: closed-loop episodes of a policy in simulation (evaluation, ``bench vla``).

The core imports no ROS; the VLA node lives in ``lang2policy.ros``.
"""
