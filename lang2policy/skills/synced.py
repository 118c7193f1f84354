"""Skills on a world that is a mirror of measurements: synced before every call.

Where the scene model is not the truth but what the arm and perception last reported (the
graph's ``RemoteSession``, the in-process ``CameraSession``), a skill must decide on the
latest of it: ``SyncedSkillBackend`` syncs the session's mirror before it lists objects,
plans a call's path for the privilege policy, or executes a call.
"""

from __future__ import annotations

from typing import Any

from lang2policy.skills.backend import SimSkillBackend


class SyncedSkillBackend(SimSkillBackend):
    """``SimSkillBackend`` whose session's mirror is synced before every call."""

    def object_names(self) -> list[str]:
        self.session.sync()
        return super().object_names()

    def path(self, skill: str, bound: dict):
        self.session.sync()
        return super().path(skill, bound)

    def execute(
        self, skill: str, bound: dict, time_limit: float | None = None, workspace: Any = None
    ) -> object:
        self.session.sync()
        return super().execute(skill, bound, time_limit, workspace)
