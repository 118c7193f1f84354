"""Skills on an arm in the ROS graph: a synced mirror and interruptible motions.

``RemoteSkillBackend`` adds what live execution needs to ``SyncedSkillBackend`` (the mirror
synced before every skill call): a correction can interrupt the motion that is running
(``interrupt_for_edit``): the motion stops where it is, and the sandbox runner decides the
edited call again before it restarts. A stop (``abort``) ends the running motion, and the
planning (IK) of the next one.
"""

from __future__ import annotations

import logging
from typing import Any

from lang2policy.robots.streamed_robot import CorrectionInterrupt, MotionAborted
from lang2policy.session.remote import RemoteSession
from lang2policy.skills.catalog import SKILLS
from lang2policy.skills.synced import SyncedSkillBackend

log = logging.getLogger(__name__)


class RemoteSkillBackend(SyncedSkillBackend):
    """``SyncedSkillBackend`` on a ``RemoteSession``: interruptible motions.

    It executes exactly the arguments it is given: a person's edits are applied, and every
    restart after one is decided, by the sandbox runner's privilege gate
    (``SandboxRunner.edits``), never here.
    """

    def __init__(self, session: RemoteSession) -> None:
        super().__init__(session)
        self.current_call: tuple[str, dict] | None = None  # the motion running now

    def interrupt_for_edit(self) -> None:
        """Stop the running motion where it is so that the runner re-decides and restarts the
        call with the edited arguments (it raises ``CorrectionInterrupt`` in ``execute``)."""
        self.session.robot.interrupt(CorrectionInterrupt("arguments corrected"))

    def abort(self, reason: str) -> None:
        """Stop the running motion, or the planning of the next one (IK); the plan ends with
        ``reason``."""
        self.session.robot.interrupt(MotionAborted(reason))

    def hold(self) -> None:
        """Hold even when an interrupt is pending (it is consumed: the plan is over)."""
        for _ in range(2):
            try:
                super().hold()
                return
            except (CorrectionInterrupt, MotionAborted) as exc:
                log.info("hold after %s", exc)

    def execute(
        self, skill: str, bound: dict, time_limit: float | None = None, workspace: Any = None
    ) -> object:
        if SKILLS.get(skill) is None or SKILLS[skill].category != "motion":
            return super().execute(skill, bound, time_limit)
        self.current_call = (skill, dict(bound))
        try:
            return super().execute(skill, bound, time_limit, workspace)
        finally:
            self.current_call = None
