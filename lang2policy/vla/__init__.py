"""A small vision-language-action policy trained from demonstrations our simulation makes
(issue 17), and the running of language skills with it or another policy backend (issue 18).

The package is split into wings, one subpackage per job, listed lowest first; a wing imports
only from itself and the wings before it (the table in docs/architecture.md, checked by
test/project/test_import_boundaries.py):

- ``spec``: what a frame holds, the task families and words, image fitting, loader limits;
- ``dataset``: the LeRobotDataset v3 layout, written and read (``lang2policy dataset ...``);
- ``sim``: scenes, the oracle and the scripted demonstrations (``lang2policy record demos``);
- ``model``: the FiLM CNN with its heads, normaliser and model directory;
- ``policy``: the runtime policy with temporal ensembling;
- ``backends``: the chunk backends of the VLA node (local, openpi, OpenVLA, LeRobot);
- ``train``: training (``lang2policy train vla``) and the network's size and speed;
- ``eval``: closed-loop rollouts in simulation (evaluation, ``bench vla``);
- ``skill``: one language skill at 10 Hz, for the VLA node and ``vla_skill(...)``;
- ``coach``: corrected episodes, a scripted person correcting the VLA in words.

The core imports no ROS; the VLA node lives in ``lang2policy.ros``.
"""
