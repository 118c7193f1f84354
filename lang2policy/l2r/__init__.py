"""Language to Rewards: instructions to reward specs that the MPC optimises (no ROS here).

    from lang2policy.l2r import RewardPlanner
    planner = RewardPlanner(make_client("local"), ["red block", "blue bowl"])
    plan = planner.plan("lift the red block 10 cm", None)      # plan.spec: a RewardSpec
    plan = planner.plan("higher", plan.spec)                    # edits the running spec

Stage 1 (``descriptor``) fills the motion template (``template``), stage 2 (``coder``) turns
it into reward-API calls (``api``) that run in the sandbox (``sandboxed``); ``grammar`` keeps a
small local model's answers valid; ``run`` executes specs with the MPC in simulation.
"""

from lang2policy.l2r.planner import RewardPlan, RewardPlanner

__all__ = ["RewardPlan", "RewardPlanner"]
