"""Reward terms, the versioned reward spec and its validation (Language to Rewards)."""
