"""The simulated world made less ideal on purpose (issue 34): realism profiles, their seeded
draws, and the code that applies a draw to the scene, the camera images and the servos."""

from lang2policy.realism.profile import LEVELS, RealismProfile, ServoRealism, load_realism

__all__ = ["LEVELS", "RealismProfile", "ServoRealism", "load_realism"]
