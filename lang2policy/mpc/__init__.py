"""Sampling-based model-predictive control on ``mujoco.rollout`` (predictive sampling, CEM)."""
