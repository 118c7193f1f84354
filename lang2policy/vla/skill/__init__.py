"""Running one language skill at 10 Hz without ROS (issue 18), for the VLA node and for
``vla_skill(...)`` in policy code: the skill text to a task (``parse``), the start messages and
limits (``message``, ``limits``), a chunk backend stepped with temporal ensembling (``actor``),
language motions applied as a bounded residual (``language_motion``, ``shaping``), success
judged on measured object poses (``judge``), the keep-out stop (``keep_out_watch``), each
control step's decision (``runner``) and the in-process runner on a simulated arm (``local``).
It sits above ``backends`` and ``eval`` (it shares the rollout's success hold and time cap).
"""
