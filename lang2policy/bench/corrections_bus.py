"""The reward plans of ``bench corrections`` over the physical path: the real-time MPC drives
the SO-101 driver on the emulated servo bus, with objects from camera perception only.

``BusMPC`` plays ``LockstepMPC``'s part in a corrections run (``corrections_runs``). As the
graph's controller node does, a ``ProcessMPC`` plans in a worker process from measured states
(in this process its planning would starve the emulated bus's thread of the GIL, and the
driver's reads would time out), and a control thread at the driver node's 50 Hz reads the
joints from the bus, hands them and the object set camera perception reports to the MPC, and
writes the MPC's targets to the bus. A read or write the bus does not answer is counted and
skipped, as the driver node does (the driver has commanded a hold).
Nothing in that loop reads the simulator: the world (``session.bus_camera``) runs the physics
in wall time, renders the camera and judges. ``step`` waits one re-planning period of the
world's time and judges the run on the true scene (the task's own rule, as ``LockstepMPC``
judges with ``judge``). The scripted person corrects from what perception reports
(``positions``).

``BusRoute`` lays each run's table on the bus session and makes its ``BusMPC``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np

from lang2policy.bench.bus_live_arm import TICK
from lang2policy.mpc.cost import SuccessTracker
from lang2policy.mpc.measured_state import InvalidStateError
from lang2policy.mpc.model import ObjectState, PlanningModel
from lang2policy.mpc.process import ProcessMPC
from lang2policy.mpc.sampler import MPCConfig
from lang2policy.rewards.spec import RewardSpec
from lang2policy.robots.feetech.bus_errors import FeetechError

REPLAN_PERIOD = 0.1  # s of the world's time per ``step`` (LockstepMPC's re-planning period)
STEP_WAIT = 5.0  # s of wall time a step waits for the world's clock before it says so
READY_WAIT = 60.0  # s of wall time for the planning process to start


class BusMPC:
    """``LockstepMPC``'s interface over the physical path (see the module docstring)."""

    def __init__(
        self,
        bus,
        spec: RewardSpec,
        config: MPCConfig | None = None,
        judge: RewardSpec | None = None,
        on_close: Callable[[BusMPC], None] | None = None,
    ) -> None:
        """``on_close``: told of this run's counts when it closes."""
        self.bus, self.world = bus, bus.truth.world
        self._on_close = on_close
        self.config = config or MPCConfig()
        self.judge = judge
        self.mpc = ProcessMPC("so101", self.config, objects=sorted(bus.perceived())).start()
        if not self.mpc.ready.wait(READY_WAIT):
            self.mpc.stop()
            raise TimeoutError(f"the MPC's planning process did not start in {READY_WAIT} s")
        with bus.truth_lock():
            self._truth = PlanningModel(
                self.world.description, self.world.present, self.config.timestep
            )
        self.rejected_states = self.bus_errors = 0
        self.set_spec(spec)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._control, name="bus-mpc", daemon=True)
        self._thread.start()

    def set_spec(self, spec: RewardSpec) -> None:
        """Swap the objective (the warm start carries over), as ``LockstepMPC.set_spec``."""
        self.spec = spec
        self.tracker = SuccessTracker(self.judge or spec)
        self.mpc.set_spec(spec)

    def step(self) -> str:
        """One re-planning period of the world's time; the judge's status on the true scene."""
        end = self.world.time + REPLAN_PERIOD
        deadline = time.monotonic() + STEP_WAIT
        while self.world.time < end - 1e-9:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the emulated arm's world stood still for {STEP_WAIT} s")
            time.sleep(0.005)
        return self.tracker.update(self.world.time, self.measure_now())

    def measure_now(self):
        """The true scene's features (the tool, the objects): what the judge reads."""
        with self.bus.truth_lock():
            self._truth.load_world(self.world)
            return self._truth.features_now()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)
        self.plan_hz = self.mpc.stats().rate_hz
        self.mpc.stop()
        if self._on_close is not None:
            self._on_close(self)

    # ------------------------------------------------------------------ the driver's loop
    def _control(self) -> None:
        robot = self.bus.robot
        names = list(robot.limits.names)
        next_tick = time.monotonic()
        while not self._stop.is_set():
            next_tick += TICK
            try:
                self._tick(robot, names)
            except FeetechError:
                self.bus_errors += 1  # the driver commanded a hold; the next tick tries again
            time.sleep(max(0.0, next_tick - time.monotonic()))

    def _tick(self, robot, names: list[str]) -> None:
        """One readout of the bus and perception into the MPC, its target onto the bus."""
        obs = robot.get_observation()
        objects = {
            name: ObjectState(tuple(p), tuple(q)) for name, (p, q) in self.bus.perceived().items()
        }
        try:
            self.mpc.update_state(
                obs.time,
                dict(zip(obs.names, obs.position, strict=True)),
                objects,
                dict(zip(obs.names, obs.velocity, strict=True)),
            )
        except InvalidStateError:
            self.rejected_states += 1
        action = self.mpc.action()
        if action is not None:
            robot.send_action(np.array([action[n] for n in names], float))


class BusRoute:
    """The corrections runs' route over the physical path: ``reset`` lays the table on the
    bus session (colours calibrated once, by its caller), ``make_mpc`` makes a ``BusMPC``."""

    def __init__(self, bus) -> None:
        self.bus = bus
        self.world = bus.truth.world
        self.counts = {"runs": 0, "bus_errors": 0, "rejected_states": 0, "plan_hz": []}

    def _count(self, run: BusMPC) -> None:
        self.counts["runs"] += 1
        self.counts["bus_errors"] += run.bus_errors
        self.counts["rejected_states"] += run.rejected_states
        self.counts["plan_hz"].append(round(run.plan_hz, 1))

    def reset(self, seed: int, objects: list[str]) -> None:
        self.bus.reset(seed, list(objects))

    def make_mpc(self, world, spec: RewardSpec, config: MPCConfig, judge: RewardSpec) -> BusMPC:
        return BusMPC(self.bus, spec, config, judge=judge, on_close=self._count)

    def positions(self) -> dict[str, list[float]]:
        return perceived_positions(self.bus)


def perceived_positions(bus) -> dict[str, list[float]]:
    """Where camera perception puts each object: what the person's correction uses."""
    return {name: [float(v) for v in p] for name, (p, _q) in bus.perceived().items()}
