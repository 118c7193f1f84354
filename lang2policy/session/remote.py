"""Skills on an arm in the ROS graph: the planner's session when the robot is another node.

``RemoteSession`` has the shape of ``lang2policy.session.sim.SimSession`` (``world``, ``robot``,
``kinematics``, ``primitives``), so the skill backend, the sandbox and the Code-as-Policies
planner run on it unchanged. Its robot is a ``StreamedRobot`` (commands go out through a
``send`` function, states come in through ``update_state``) and its world a ``MirrorWorld``
kept in step with the measured joints and object poses (``update_objects``).

``RemoteSkillBackend`` adds what live execution needs: the mirror is synced before every skill
call, and a correction can interrupt the motion that is running (``interrupt_for_edit``): the
motion stops where it is, and the sandbox runner decides the edited call again before it
restarts. A stop (``abort``) ends the running motion, and the planning (IK) of the next one.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from lang2policy.control.kinematics import Kinematics
from lang2policy.control.primitives import MotionPrimitives
from lang2policy.errors import Lang2PolicyError
from lang2policy.robots.robot import Observation
from lang2policy.robots.sim_robot import limits_for
from lang2policy.robots.streamed_robot import CorrectionInterrupt, StreamedRobot
from lang2policy.scene.mirror import MirrorWorld

log = logging.getLogger(__name__)

VIEW_SETS = 3  # object sets heard with the arm out of view before a goal is judged (10 Hz: 0.3 s)
VIEW_POLL = 0.05  # s between looks at the object sets heard
LOOK_TRIES = 3  # moves to ``look`` tried while corrections cut them short


class RemoteSession:
    """World mirror + streamed robot + kinematics + primitives for one arm in the graph."""

    def __init__(
        self,
        robot: str,
        send: Callable[[np.ndarray], None],
        control_period: float = 0.02,
        stale_after: float = 2.0,
        layout: str = "cap_tabletop",
    ) -> None:
        self.world = MirrorWorld(robot, layout)
        description = self.world.description
        limits = limits_for(self.world.arm, description.max_joint_speed, control_period)
        self.robot = StreamedRobot(limits, send, stale_after)
        self.kinematics = Kinematics(self.world.model, description, self.world.arm)
        self.kinematics.check_interrupt = self.robot.raise_if_aborted  # a stop ends IK too
        self.control_period = control_period
        self.primitives = MotionPrimitives(self.robot, self.kinematics, self.world, control_period)
        self._objects: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {}
        self._object_sets = 0  # object sets heard so far
        self._lock = threading.Lock()
        # s to wait, with the arm out of the view, for a camera to see the objects again before a
        # goal is judged (0: perception sees through the arm, as ground truth does)
        self.view_timeout = 0.0

    # ------------------------------------------------------------- measurements (any thread)
    def update_state(self, names: Sequence[str], position, velocity, stamp: float) -> None:
        """A ``/joint_states`` sample; joints are mapped by name (extra names are ignored)."""
        index = {n: i for i, n in enumerate(names)}
        wanted = self.robot.limits.names
        missing = [n for n in wanted if n not in index]
        if missing:
            raise ValueError(f"joint state lacks {missing}; the robot has {list(wanted)}")
        pos = np.array([float(position[index[n]]) for n in wanted])
        vel = np.array(
            [float(velocity[index[n]]) if len(velocity) > index[n] else 0.0 for n in wanted]
        )
        self.robot.update(Observation(tuple(wanted), pos, vel, float(stamp)))

    def update_objects(self, objects: Mapping[str, tuple[Sequence[float], Sequence[float]]]):
        """The latest object set (name -> (position, quat w-x-y-z))."""
        snapshot = {
            n: (tuple(map(float, p)), tuple(map(float, q))) for n, (p, q) in objects.items()
        }
        with self._lock:
            self._objects = snapshot
            self._object_sets += 1

    def object_snapshot(self) -> dict[str, tuple[tuple[float, ...], tuple[float, ...]]]:
        with self._lock:
            return dict(self._objects)

    # ------------------------------------------------------------- the executing thread
    def sync(self) -> None:
        """Bring the mirror to the latest measurements (call from the executing thread)."""
        state = self.robot.get_observation() if self.robot.is_connected else None
        self.world.sync(
            arm_joints=None if state is None else state.position[:-1],
            gripper_opening=None if state is None else state.position[-1],
            objects=self.object_snapshot(),
            held=self.primitives.held_in_hand() if self.view_timeout > 0 else None,
        )

    def observe(self, expected: list[str], say: Callable[[str], None] | None = None) -> None:
        """The scene as perception sees it, to judge a goal (``Session.observe``). With a
        camera (``view_timeout`` > 0) the arm is first raised out of the view (``look``): a
        gripper hovering over a bowl hides the block it just placed there, and a goal judged then is
        judged on a stale or missing block. Then the mirror waits for object sets seen with
        the arm at rest (``VIEW_SETS``), until every ``expected`` object is back or
        ``view_timeout`` s have passed; a stop during the move or the wait ends it. ``say``
        hears what it waits for."""
        say = say or log.info
        if self.view_timeout <= 0.0:
            self.sync()
            return
        say("raising the arm out of the camera's view to look at the scene")
        try:
            self._go_look()
            missing = self._wait_for_view(expected)
        except Lang2PolicyError as exc:  # a stop, a lost arm: judge the scene as it is
            say(f"judging the scene as it is: the arm did not get out of the view ({exc})")
            self.sync()
            return
        if missing:
            say(f"perception does not see {missing} after {self.view_timeout:g} s")
        self.sync()

    def _go_look(self) -> None:
        """The arm to its ``look`` pose. A correction arriving now has no call left to edit
        (the program ended): it is dropped and the move goes on."""
        for attempt in range(LOOK_TRIES):
            try:
                self.primitives.go_look()
                return
            except CorrectionInterrupt:
                if attempt == LOOK_TRIES - 1:
                    raise
                self.robot.clear_interrupt()

    def _wait_for_view(self, expected: list[str]) -> list[str]:
        """Wait for ``VIEW_SETS`` fresh object sets holding every ``expected`` name, at most
        ``view_timeout`` s; returns the names still missing."""
        with self._lock:
            heard = self._object_sets
        deadline = time.monotonic() + self.view_timeout
        while True:
            with self._lock:
                fresh = self._object_sets - heard >= VIEW_SETS
                missing = sorted(set(expected) - set(self._objects))
            if (fresh and not missing) or time.monotonic() >= deadline:
                return missing
            self.robot.raise_if_aborted()  # a stop ends the wait at once
            time.sleep(VIEW_POLL)

    def reset(self, seed: int | None = None, objects: list[str] | None = None) -> list[str]:
        """Fresh primitives (nothing held) on the scene as measured; returns its objects."""
        self.primitives = MotionPrimitives(
            self.robot, self.kinematics, self.world, self.control_period
        )
        self.sync()
        return self.world.object_names()
