"""Reinforcement learning on language-written reward specs: environments, training, policies."""
