"""The SO-101 hardware backend: a ``Robot`` over a Feetech STS3215 bus.

Units match the simulation exactly (arm joints in the model's radians, gripper opening 0..1),
through the arm's ``Calibration``; the action names equal ``SimRobot``'s.

Connecting opens the port, checks that all six servos answer, writes goal = present position
(a servo drives to its stored goal when torque comes on) and enables torque. On a bus error
while reading or writing the robot tries to hold where it is (goal = last present position,
torque left as it is) and re-raises the error.
"""

from __future__ import annotations

import contextlib
import time

import numpy as np

from lang2policy.robots.feetech.bus import FeetechBus
from lang2policy.robots.feetech.bus_errors import FeetechError, ServoTimeout
from lang2policy.robots.feetech.servo_state import ServoState
from lang2policy.robots.robot import Observation, Robot
from lang2policy.robots.safety import JointLimits
from lang2policy.robots.sim_robot import MAX_TRACKING_DEVIATION
from lang2policy.robots.so101.calibration import RAD_PER_TICK, Calibration
from lang2policy.scene.robot_description import load_robot_description


def so101_limits(
    calibration: Calibration, max_joint_speed: float | None = None, control_period: float = 0.02
) -> JointLimits:
    """Action limits as ``sim_robot.limits_for`` builds them, with the calibrated ranges."""
    if max_joint_speed is None:
        max_joint_speed = load_robot_description("so101").max_joint_speed
    step = max_joint_speed * control_period
    dof = len(calibration.arm)
    return JointLimits(
        names=calibration.names,
        lower=np.array([j.lower_rad for j in calibration.arm] + [0.0]),
        upper=np.array([j.upper_rad for j in calibration.arm] + [1.0]),
        max_step=np.append(np.full(dof, step), 1.0),
        max_deviation=np.append(np.full(dof, MAX_TRACKING_DEVIATION), 1.0),
    )


class SO101Robot(Robot):
    """A real SO-101 (or the servo emulator) on ``port``; ``bus`` may be given for tests."""

    name = "so101"

    def __init__(
        self,
        port: str,
        calibration: Calibration | None = None,
        *,
        control_period: float = 0.02,
        max_joint_speed: float | None = None,
        bus: FeetechBus | None = None,
    ) -> None:
        self.calibration = calibration if calibration is not None else Calibration.load()
        self.port = port
        self.control_period = control_period
        self.bus = bus if bus is not None else FeetechBus(port)
        self.servo_states: dict[int, ServoState] = {}  # last readout, by servo id
        super().__init__(so101_limits(self.calibration, max_joint_speed, control_period))

    @property
    def servo_ids(self) -> tuple[int, ...]:
        return self.calibration.servo_ids

    # -- diagnostics -----------------------------------------------------------------------------

    def diagnostics(self) -> dict[str, dict[str, object]]:
        """Per joint from the last readout: servo id, tick, temperature, voltage, error names."""
        out: dict[str, dict[str, object]] = {}
        for joint in self.calibration.joints:
            state = self.servo_states.get(joint.servo_id)
            if state is not None:
                out[joint.name] = {
                    "id": state.servo_id,
                    "ticks": state.position,
                    "temperature_c": state.temperature,
                    "voltage_v": state.voltage,
                    "load": state.load,
                    "errors": state.error_names,
                }
        return out

    # -- Robot -----------------------------------------------------------------------------------

    def _connect(self) -> None:
        self.bus.open()
        try:
            try:
                self.bus.check_servos(self.servo_ids)
            except ServoTimeout as exc:
                names = [self.calibration.by_id(i).name for i in exc.servo_ids]
                raise ServoTimeout(
                    f"SO-101 on {self.port}: servo(s) {', '.join(map(str, exc.servo_ids))} "
                    f"({', '.join(names)}) did not answer. {exc}",
                    exc.servo_ids,
                ) from exc
            states = self.bus.read_state(self.servo_ids)
            self.servo_states = states
            # The goal register survives torque-off: drive to where the arm is, not to it.
            self.bus.write_goal_positions({i: s.position for i, s in states.items()})
            self.bus.torque(self.servo_ids, True)
        except BaseException:
            self.bus.close()
            raise

    def _disconnect(self) -> None:
        try:
            self.bus.torque(self.servo_ids, False)
        finally:
            self.bus.close()

    def _read(self) -> Observation:
        try:
            states = self.bus.read_state(self.servo_ids)
        except FeetechError as exc:
            self._hold(exc)
            raise
        self.servo_states = states
        stamp = time.monotonic()
        ticks = {i: s.position for i, s in states.items()}
        position = np.array(self.calibration.ticks_to_action(ticks))
        velocity = [j.sign * states[j.servo_id].speed * RAD_PER_TICK for j in self.calibration.arm]
        g = self.calibration.gripper
        assert g.open is not None and g.closed is not None
        velocity.append(states[g.servo_id].speed / (g.open - g.closed))
        return Observation(self.limits.names, position, np.array(velocity), stamp)

    def _write(self, action: np.ndarray) -> None:
        goals = self.calibration.action_to_ticks(action)
        try:
            self.bus.write_goal_positions(goals)
        except FeetechError as exc:
            self._hold(exc)
            raise

    def _hold(self, exc: FeetechError) -> None:
        """Safe stop after a bus error: goal = last present position where possible."""
        if not self.servo_states:
            return
        hold = {i: s.position for i, s in self.servo_states.items()}
        try:
            self.bus.write_goal_positions(hold)
        except Exception as hold_exc:  # the bus may be gone: report, keep the first error
            with contextlib.suppress(Exception):
                exc.add_note(f"SO-101: holding the last position also failed: {hold_exc}")
        else:
            exc.add_note("SO-101: commanded every servo to hold its last read position")
