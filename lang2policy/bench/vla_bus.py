"""``bench vla --robot so101-hw --emulate --perception camera``: the VLA's evaluation episodes
on the physical path, in wall time.

``BusRollouts`` runs the policy as the VLA node drives a physical SO-101: each 0.1 s it takes
the cameras' frames (rendered from the simulated world as the sensor records them, under the
realism profile) and the joints the real SO-101 driver reads over the emulated servo bus
(``session.bus_camera``: the STS3215 emulator with the profile's deadband, backlash, lag,
latency and reading noise), and the driver writes the policy's target to the bus in 50 Hz
steps. The world runs its physics in wall time on the bus's clock thread; a slow policy step
is the arm's loss, as on the robot. Success is judged on the true table (``vla.sim.judge``), and
beside it the success check the VLA node runs on what camera perception reports
(``ObjectsJudge``): what the node's status would have said. As the node does, once the
policy's targets stand still with its check not done, the arm folds up to the look pose and
the check is made from there (``vla.skill.look``). An episode runs until both have held for
``SUCCESS_HOLD`` s (the node keeps acting until its own check holds), the look has seen the
goal not done, or time is up.
Episodes run one at a time in this process (the bus's threads and the policy share the cores,
as the graph's nodes would).
"""

from __future__ import annotations

import copy
import time

import numpy as np

from lang2policy.errors import UnknownObjectError
from lang2policy.robots.feetech.bus_errors import FeetechError
from lang2policy.scene.mirror import MirrorWorld
from lang2policy.vla.eval.rollout import MAX_SECONDS, SUCCESS_HOLD
from lang2policy.vla.sim.episodes import EpisodeSpec, set_up_scene
from lang2policy.vla.sim.frames import frame_renderer, sensor_frame
from lang2policy.vla.sim.judge import judge, start_positions
from lang2policy.vla.skill.judge import ObjectsJudge
from lang2policy.vla.skill.look import FAMILIES as LOOK_FAMILIES
from lang2policy.vla.skill.look import WATCH_S, LookToConfirm, look_pose
from lang2policy.vla.spec.schema import CAMERAS, FPS

COMMAND_STEPS = 5  # driver writes per policy step (50 Hz at the policy's 10 Hz)


class BusRollouts:
    """The VLA's episodes over the emulated SO-101 bus (see the module docstring)."""

    def __init__(self, profile) -> None:
        from lang2policy.session.bus_camera import BusCameraSession

        self.bus = BusCameraSession("so101", realism=profile)
        self.bus.use_rig(0)  # one user's objects, colours calibrated once
        self.world = self.bus.truth.world
        self.renderer = frame_renderer(self.world)
        self.mirror = MirrorWorld("so101")  # the VLA node's view of the table
        self.bus_errors = 0

    def close(self) -> None:
        self.bus.close()

    def run(self, policy, spec: EpisodeSpec) -> dict:
        """One episode: the table laid for ``spec``, the policy until success or time up."""
        appearance = self.bus.lay_scene(lambda truth: set_up_scene(truth, spec))
        try:
            self.renderer.sync_look()
            return self._loop(policy, spec)
        finally:
            with self.bus.truth_lock():
                appearance.restore(self.world)

    def _loop(self, policy, spec: EpisodeSpec) -> dict:
        world, task = self.world, spec.task
        with self.bus.truth_lock():
            start = start_positions(world, task)
        node_judge = self._node_judge(task)
        began, limit = world.time, MAX_SECONDS[task.family]
        truth, node = _Hold(), _Hold()
        cameras, frame, acts, last = getattr(policy, "cameras", CAMERAS), 0, [], None
        policy.reset()
        detail, look = "", _look(task) if node_judge is not None else None
        while world.time - began < limit:
            images = self._frames(cameras, frame)
            frame += 1
            state, now = self._joints(), world.time
            if look is not None and look.looking:  # the node drives the arm, not the policy
                target = look.target(now).astype(float)
                look.sent(target, now)
            else:
                clock = time.perf_counter()
                target = np.asarray(policy.act(images, state, spec.instruction), float)
                acts.append(time.perf_counter() - clock)
                due = look is not None and look.due(target, now, now - began, limit)
                if due and node.since is None:
                    look.start(state, now)
            last = self._drive(state if last is None else last, target)
            with self.bus.truth_lock():
                done, detail = judge(world, task, start)
            truth.update(done, world.time)
            seen = node_judge is not None and node_judge.check(self._perceived())[0]
            node.update(seen, world.time)
            if truth.held and (node.held or node_judge is None):
                break
            if look is not None and look.looking and not seen and _looked(look, world.time):
                break  # the node ends the skill: not done, as seen from the look pose
        return {
            "success": truth.held, "detail": detail, "sim_s": round(world.time - began, 1),
            "node_success": node.held, "node_started": node_judge is not None,
            "act_s": acts, "steps": frame,
        }  # fmt: skip

    def _node_judge(self, task) -> ObjectsJudge | None:
        """The VLA node's success check as it starts the skill from what perception reports;
        None where the node would refuse the skill (an object it needs is not seen)."""
        try:
            return ObjectsJudge(task, self.mirror, self._perceived())
        except UnknownObjectError:
            return None

    def _frames(self, cameras, frame: int) -> dict[str, np.ndarray]:
        """The cameras' images of the table as it is now, as the sensor records them."""
        with self.bus.truth_lock():
            snapshot = copy.copy(self.world.data)
        return {
            c: sensor_frame(self.world, self.renderer.render(snapshot, c), frame) for c in cameras
        }

    def _joints(self) -> np.ndarray:
        """The joints and gripper the driver reads over the bus (once more after a timeout)."""
        try:
            return np.asarray(self.bus.robot.get_observation().position, float)
        except FeetechError:
            self.bus_errors += 1
            return np.asarray(self.bus.robot.get_observation().position, float)

    def _drive(self, origin: np.ndarray, target: np.ndarray) -> np.ndarray:
        """The target written to the bus in ``COMMAND_STEPS`` steps over one policy period."""
        period = 1.0 / (FPS * COMMAND_STEPS)
        next_tick = time.monotonic()
        for fraction in np.arange(1, COMMAND_STEPS + 1) / COMMAND_STEPS:
            try:
                self.bus.robot.send_action(origin + fraction * (target - origin))
            except FeetechError:
                self.bus_errors += 1  # the driver commanded a hold; the next write tries again
            next_tick += period
            time.sleep(max(0.0, next_tick - time.monotonic()))
        return target

    def _perceived(self):
        """Camera perception's object poses as the VLA node's success check reads them."""
        return {
            name: (np.asarray(p), np.asarray(q)) for name, (p, q) in self.bus.perceived().items()
        }


class _Hold:
    """Whether a check has held for ``SUCCESS_HOLD`` s without a break (as a rollout and the
    VLA node end a skill)."""

    def __init__(self) -> None:
        self.since: float | None = None
        self.held = False

    def update(self, done: bool, now: float) -> None:
        self.since = (self.since if self.since is not None else now) if done else None
        self.held |= self.since is not None and now - self.since >= SUCCESS_HOLD


def _look(task) -> LookToConfirm | None:
    """The VLA node's look before judging (``look_to_confirm``, on by default)."""
    if task.family not in LOOK_FAMILIES:
        return None
    return LookToConfirm(np.array(look_pose()))


def _looked(look: LookToConfirm, now: float) -> bool:
    """The node has watched from the look pose long enough to end the skill."""
    arrived = look.watched_since()
    return arrived is not None and now >= arrived + WATCH_S


def run_bus_episodes(model: str, specs: list, level: str, standalone: list[dict], say) -> list:
    """``specs`` on the physical path at realism ``level``, as result rows of ``bench vla``
    (``realism``: "<level> bus"; the oracle's verdict is the standalone run's, same scene)."""
    from lang2policy.realism import load_realism
    from lang2policy.vla.policy.runtime import VLAPolicy

    policy = VLAPolicy.load(model, device="cpu", threads=1)
    oracle = {r["index"]: r for r in standalone if r.get("realism") == level}
    rollouts = BusRollouts(load_realism(level))
    results = []
    try:
        for number, spec in enumerate(specs, 1):
            run = rollouts.run(policy, spec)
            reference = oracle.get(spec.index, {})
            results.append({
                "index": spec.index, "family": spec.task.family, "split": spec.split,
                "instruction": spec.instruction, "realism": f"{level} bus",
                "oracle": reference.get("oracle", False),
                "oracle_detail": reference.get("oracle_detail", ""), "block_error_mm": None,
                "video": [], **run,
            })  # fmt: skip
            node = (
                ("says done" if run["node_success"] else "does not")
                if run["node_started"]
                else "would not start: an object it names was not seen"
            )
            say(f"{level} bus {number}/{len(specs)} {spec.task.family}/{spec.split}: "
                f"{'ok' if run['success'] else 'FAIL'} ({run['detail']}); the VLA node on "
                f"camera perception: {node}")  # fmt: skip
    finally:
        rollouts.close()
    for result in results:
        result["bus_errors"] = rollouts.bus_errors
    return results
