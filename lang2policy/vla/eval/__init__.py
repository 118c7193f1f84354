"""Closed-loop evaluation in simulation: episodes of a policy on the demonstrations' scenes,
judged as the demonstrations are (``rollout``: training's periodic evaluation, ``lang2policy
bench vla`` and the tests), and where the arm starts them (``start_pose``: at rest or ``away``).
It sits on ``sim`` (scenes, frames, oracle, judge) and ``model`` (drawing the grounding).
"""
