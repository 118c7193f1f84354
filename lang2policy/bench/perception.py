"""``lang2policy bench perception``: camera perception against the simulator's ground truth, per
realism level (issue 34).

For each level of ``--realism`` (``off,mild,hard`` by default) a world is built with that
profile; over ``--layouts`` seeded layouts, the fixed camera's frame of the layout at rest
(with the level's sensor effects) goes through ``CameraPerception`` exactly as the perception
node runs it: the calibrated camera pose and intrinsics are the nominal ones, while the world
renders from where the drawn error put the camera. Per object kind and colour: detection rate
(of the objects the camera can see: at least ``VISIBLE_PX`` of their pixels in view and outside
the arm's outline, the convex hull of each visible part of the arm drawn from where the camera
truly is, and at least ``VISIBLE_SHARE`` of what it would show without the arm: an object the
arm mostly hides is kept by the tracker once seen, not found anew), phantom objects (names not
on the table), position error (mean, p90, cm) and yaw error of blocks. Then ``--moving``
episodes of a scripted pick-and-place per level, perceived every 0.1 s of simulated time while
the arm moves through the view: the same figures per frame, and how often the published object
set changed while the table's did not. Frames per second and CPU seconds per frame are measured
around ``CameraPerception.process``.

Colours are calibrated as a user would (``perception.color_calibration``, ``lang2policy
calibrate colors``): a rig, one user's objects and table (their shades and tint drawn once), is
shared by ``RIG_LAYOUTS`` layouts, and its palette is fitted from frames of all its colours as
blocks and as bowls, each frame under its own light; the measured layouts are lit differently
again. The light changes with every layout and the white balance has to follow it.

Pictures (``--out``): per level, the first layouts' frames with each detection (green: name at
the detected place) and the true pose (red cross) drawn, as PNG; the moving episode as MP4.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

from lang2policy import cli_types
from lang2policy.bench import perception_report as report
from lang2policy.errors import ConfigError

LEVELS = ("off", "mild", "hard")
VISIBLE_PX = 20  # an object with fewer unhidden pixels is not expected to be found
VISIBLE_SHARE = 0.5  # nor one the arm hides more of than this (the tracker keeps those)
ARM_GROUP = 2  # the geom group of the robot's visible parts
FRAME_PERIOD = 0.1  # s of simulated time between perceived frames while the arm moves
PICTURES = 3  # layouts per level drawn as PNG
CONFIRM = 3  # frames a new name must be seen in (the perception node's default)
RIG_LAYOUTS = 10  # layouts per rig: one user's objects and table, calibrated once
CALIBRATION_FRAMES = {"block": 2, "bowl": 4}  # frames of the colour calibration per kind
CALIBRATION_SEED = 900_000  # calibration layouts: seeds apart from the measured layouts
CALIBRATION_TRIES = 20  # layouts tried for a calibration frame that shows every block clearly
CALIBRATION_PX = 80  # pixels each block shows outside the arm's outline in a calibration frame


def say(text: str) -> None:
    print(f"[perception] {text}", file=sys.stderr, flush=True)


class LevelRun:
    """One realism level: its world, renderers and the perception under test."""

    def __init__(self, robot: str, level: str, camera: str, size: int) -> None:
        from lang2policy.perception.camera import PinholeCamera
        from lang2policy.perception.camera_pose import sim_camera_pose
        from lang2policy.perception.robot_mask import RobotMask
        from lang2policy.perception.scene import sim_intrinsics
        from lang2policy.realism import load_realism
        from lang2policy.session.sim import SimSession

        self.robot, self.level, self.camera, self.size = robot, level, camera, size
        self.profile = load_realism(level)
        self.session = SimSession(robot, realism=self.profile)
        self.world = self.session.world
        self.intrinsics = sim_intrinsics(robot, camera, size, size)  # what calibration knows
        self.pose = sim_camera_pose(robot, camera)
        self.calibrated = PinholeCamera(self.intrinsics, self.pose)
        self._renderer = _renderers(self.world.model, size)
        self._outline = RobotMask(robot, dilate_px=0)
        self._mask = RobotMask(robot)  # as the perception node masks the calibration frames
        self._palettes: dict = {}
        self._no_arm = _without_group(ARM_GROUP)

    def close(self) -> None:
        for renderer in self._renderer:
            renderer.close()

    def perception(self, seed: int):
        """The perception under test for layout ``seed``: with the palette its rig's colour
        calibration fitted. Call it before ``session.reset(seed)`` (calibrating resets)."""
        return self.perception_with(self.palette(seed // RIG_LAYOUTS))

    def perception_with(self, palette):
        """``CameraPerception`` as the perception node runs it, with ``palette``."""
        from lang2policy.perception.pipeline import CameraPerception

        perception = CameraPerception(
            self.robot, self.pose, palette=palette, max_missed=3, confirm=CONFIRM
        )
        perception.set_intrinsics(self.intrinsics)
        return perception

    def palette(self, rig: int):
        """The palette ``calibrate colors`` fits for ``rig`` (one user's objects and table):
        all ten colours as blocks, then as bowls (``CALIBRATION_FRAMES``), each frame under its
        own light."""
        from lang2policy.perception.color_calibration import fit_palette
        from lang2policy.perception.scene import scene_palette
        from lang2policy.scene.objects import COLORS

        if rig not in self._palettes:
            self.world.rig = rig
            colors, frames = sorted(COLORS), []
            for kind, count in CALIBRATION_FRAMES.items():
                for index in range(count):
                    chosen = colors[index::count]
                    number = sum(CALIBRATION_FRAMES.values()) * rig + len(frames)
                    frames.append(self._calibration_frame(number, chosen, kind))
            fit = fit_palette(frames, scene_palette(self.robot))
            self._palettes[rig] = fit.palette
            say(f"{self.level}: rig {rig} colours calibrated (not found: {fit.missed or 'none'})")
        return self._palettes[rig]

    def frame(self, seed: int, index: int) -> tuple[np.ndarray, dict[str, int]]:
        """(the camera's frame as the sensor records it, unhidden pixels per object)."""
        from lang2policy.realism.image_effects import apply_image_effects

        color, segment = self._renderer
        color.update_scene(self.world.data, camera=self.camera)
        rgb = color.render()
        if self.world.look is not None:
            rng = np.random.default_rng([seed, index, 7])
            rgb = apply_image_effects(rgb, self.world.look.image, rng)
        segment.update_scene(self.world.data, camera=self.camera, scene_option=self._no_arm)
        whole = _visible_pixels(self.world, segment.render()[..., 0])
        segment.update_scene(self.world.data, camera=self.camera)
        geoms = segment.render()[..., 0]
        self._outline.pose(self.joints())
        geoms[self._outline.mask(self.true_camera())] = -1
        shown = _visible_pixels(self.world, geoms)
        return rgb, {n: c if c >= VISIBLE_SHARE * whole[n] else 0 for n, c in shown.items()}

    def true_camera(self):
        """The camera where the realism profile's error put it, with its true focal length."""
        from lang2policy.perception.camera import CameraPose, PinholeCamera
        from lang2policy.perception.camera_pose import MUJOCO_TO_OPTICAL
        from lang2policy.perception.scene import sim_intrinsics

        cam = self.world.model.camera(self.camera)
        data = self.world.data
        rotation = data.cam_xmat[cam.id].reshape(3, 3) @ MUJOCO_TO_OPTICAL
        nominal = sim_intrinsics(self.robot, self.camera, self.size, self.size)
        focal = 0.5 * self.size / math.tan(math.radians(float(cam.fovy[0])) / 2)
        k = nominal.k.copy()
        k[0, 0] = k[1, 1] = focal
        intrinsics = type(nominal)(k, nominal.width, nominal.height)
        return PinholeCamera(intrinsics, CameraPose(data.cam_xpos[cam.id].copy(), rotation))

    def _calibration_frame(self, number: int, colors: list[str], kind: str):
        """A frame of one ``kind`` of each of ``colors``, all in clear view (as a user places
        them): the first of a few seeded layouts where each shows ``CALIBRATION_PX``."""
        from lang2policy.perception.color_calibration import CalibrationFrame

        for attempt in range(CALIBRATION_TRIES):
            seed = CALIBRATION_SEED + 100 * number + attempt
            self.session.reset(seed, objects=[f"{c} {kind}" for c in colors])
            rgb, visible = self.frame(seed, 0)
            if min(visible.values()) >= CALIBRATION_PX:
                break
        self._mask.pose(self.joints())
        names = tuple(f"{c} {kind}" for c in colors)
        return CalibrationFrame(rgb, names, self._mask.mask(self.calibrated))

    def joints(self) -> dict[str, float]:
        positions = [*self.world.arm_qpos(), self.world.gripper_opening()]
        return dict(zip(self.world.arm.action_names, positions, strict=True))

    def truth(self) -> dict[str, tuple[np.ndarray, float, str]]:
        """Name -> (position, yaw, kind) of every object on the table."""
        return {
            n: (
                self.world.object_pose(n).position,
                self.world.object_yaw(n),
                self.world.object_kind(n),
            )
            for n in self.world.present
        }


def _without_group(group: int):
    """Render options that leave out the geoms of ``group``."""
    import mujoco

    option = mujoco.MjvOption()
    option.geomgroup[group] = 0
    return option


def _renderers(model, size: int):
    import mujoco

    color = mujoco.Renderer(model, height=size, width=size)
    segment = mujoco.Renderer(model, height=size, width=size)
    segment.enable_segmentation_rendering()
    return color, segment


def _visible_pixels(world, geoms: np.ndarray) -> dict[str, int]:
    owners = world.model.geom_bodyid
    counts = {}
    for name in world.present:
        body = world.objects[name].body_id
        ids = np.flatnonzero(owners == body)
        counts[name] = int(np.isin(geoms, ids).sum())
    return counts


def perceive(run: LevelRun, perception, seed: int, index: int):
    """One frame through ``perception``: (frame, its record for the report)."""
    rgb, visible = run.frame(seed, index)
    perception.set_joints(run.joints(), run.world.data.time)
    wall, cpu = time.perf_counter(), time.process_time()
    update = perception.process(rgb, run.world.data.time)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    record = report.frame_record(perception.objects, run.truth(), visible, VISIBLE_PX)
    record.update(wall_s=wall, cpu_s=cpu, changed=update.changed)
    return rgb, record


def at_rest(run: LevelRun, seeds: list[int], out: Path | None) -> tuple[list[dict], list[dict]]:
    """Records of each layout's frame at rest: calibrated, and with the scene's palette (the
    baseline: no colour calibration, white balance against the scene's table)."""
    from lang2policy.perception.scene import scene_palette

    records, baseline = [], []
    for number, seed in enumerate(seeds):
        perception = run.perception(seed)
        run.world.rig = seed // RIG_LAYOUTS
        run.session.reset(seed)
        rgb, record = perceive(run, perception, seed, 0)
        records.append({**record, "seed": seed})
        _same_frame, base = perceive(run, run.perception_with(scene_palette(run.robot)), seed, 0)
        baseline.append(base)
        if out is not None and number < PICTURES:
            path = out / f"{run.level}_layout_{seed}.png"
            report.save_png(
                path, report.overlay(rgb, run.calibrated, perception.objects, run.truth())
            )
    return records, baseline


def moving(run: LevelRun, seed: int, out: Path | None) -> list[dict]:
    """A scripted pick-and-place on layout ``seed``, perceived every ``FRAME_PERIOD`` s."""
    perception = run.perception(seed)
    run.world.rig = seed // RIG_LAYOUTS
    names = run.session.reset(seed)
    block = next((n for n in names if n.endswith("block")), None)
    bowl = next((n for n in names if n.endswith("bowl")), None)
    if block is None or bowl is None:
        return []
    records, frames = [], []
    state = {"next": 0.0}

    def observe() -> None:
        if run.world.data.time + 1e-9 < state["next"]:
            return
        state["next"] = run.world.data.time + FRAME_PERIOD
        rgb, record = perceive(run, perception, seed, len(records) + 1)
        records.append({**record, "seed": seed, "time": run.world.data.time})
        if out is not None:
            frames.append(report.overlay(rgb, run.calibrated, perception.objects, run.truth()))

    run.session.robot.observers.append(observe)
    try:
        run.session.primitives.place(block, bowl)
    except Exception as exc:  # a failed motion ends the episode; its frames still count
        say(f"{run.level}: the moving episode's pick-and-place stopped: {exc}")
    finally:
        run.session.robot.observers.remove(observe)
    if out is not None and frames:
        report.save_mp4(out / f"{run.level}_moving_{seed}.mp4", frames, round(1 / FRAME_PERIOD))
    return records


def run_level(args: argparse.Namespace, level: str) -> dict:
    say(f"{level}: building the world and the camera...")
    run = LevelRun(args.robot, level, args.camera, args.size)
    try:
        seeds = list(range(args.seed, args.seed + args.layouts))
        started = time.monotonic()
        rest, baseline = at_rest(run, seeds, args.out)
        say(f"{level}: {len(rest)} layouts at rest in {time.monotonic() - started:.1f} s")
        motion = []
        for episode in range(args.moving):
            motion += moving(run, args.seed + 1000 + episode, args.out)
        say(f"{level}: {len(motion)} frames while the arm moved")
        return {
            "level": level,
            "profile": run.profile.to_dict(),
            "rest": report.summarise(rest),
            "rest_scene_palette": report.summarise(baseline),
            "moving": report.summarise(motion, moving=True),
        }
    finally:
        run.close()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--robot", default="so101", help="robot description")
    parser.add_argument("--realism", default=",".join(LEVELS), help="levels, comma-separated")
    parser.add_argument("--layouts", type=int, default=50, help="seeded layouts per level")
    parser.add_argument("--seed", type=cli_types.seed, default=0, help="first layout seed")
    parser.add_argument("--moving", type=int, default=1, help="moving episodes per level")
    parser.add_argument("--camera", default="top", help="the fixed camera perceiving")
    parser.add_argument("--size", type=int, default=224, help="image width and height (px)")
    parser.add_argument("--out", type=Path, default=Path("data/bench-perception"),
                        help="PNG per layout and MP4 per moving episode; '' = none")  # fmt: skip


def run_args(args: argparse.Namespace) -> dict:
    levels = [level.strip() for level in str(args.realism).split(",") if level.strip()]
    if not levels:
        raise ConfigError("--realism needs at least one level (off, mild, hard or a YAML file)")
    if not 1 <= args.layouts <= 1000 or not 0 <= args.moving <= 20:
        raise ConfigError("--layouts must be in 1..1000 and --moving in 0..20")
    if not 64 <= args.size <= 1280:
        raise ConfigError(f"--size must be in 64..1280 pixels, got {args.size}")
    args.out = None if str(args.out) in ("", ".") else args.out
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
    levels_out = [run_level(args, level) for level in levels]
    return {
        "robot": args.robot,
        "camera": args.camera,
        "size": args.size,
        "layouts": args.layouts,
        "levels": levels_out,
        "pictures": None if args.out is None else str(args.out),
        "targets": report.TARGETS,
    }


def format_text(result: dict) -> str:
    return report.format_text(result)


def exit_code(result: dict) -> int:
    return 0 if report.all_passed(result) else 1
