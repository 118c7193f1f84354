"""The scripted simulation demo: blocks into the bowls of matching colour, recorded to an MP4."""

from __future__ import annotations

import time
from pathlib import Path

from lang2policy.errors import Lang2PolicyError
from lang2policy.scene.render import CameraRenderer, VideoRecorder
from lang2policy.tasks import Session

# Two blocks with matching bowls, and a distractor block that must stay where it is.
DEMO_OBJECTS = ["red block", "green block", "yellow block", "red bowl", "green bowl"]


def run_demo(
    robot: str,
    out: Path,
    seed: int,
    camera: str = "front",
    fps: int = 20,
    size: tuple[int, int] = (480, 360),
    say=print,
) -> dict:
    session = Session(robot)
    names = session.reset(seed, DEMO_OBJECTS)
    tasks = [
        (n, n.replace("block", "bowl"))
        for n in names
        if n.replace("block", "bowl") in names and n.endswith("block")
    ]
    say(f"[demo] {robot} on the tabletop, seed {seed}: {', '.join(names)}")
    renderer = CameraRenderer(session.world.model, *size)
    recorder = VideoRecorder(renderer, camera, fps)
    session.robot.observers.append(lambda: recorder.maybe_capture(session.world.data))
    started = time.perf_counter()
    outcomes = []
    for block, bowl in tasks:
        say(f"[demo] put the {block} in the {bowl} ...")
        try:
            session.primitives.put_first_on_second(block, bowl)
            ok = session.world.is_in(block, bowl)
        except Lang2PolicyError as exc:
            say(f"[demo]   failed: {exc}")
            ok = False
        outcomes.append({"block": block, "bowl": bowl, "success": ok})
        say(f"[demo]   {'done' if ok else 'not in the bowl'} (sim time {session.world.time:.1f} s)")
    session.primitives.go_home()
    path = recorder.save(out)
    renderer.close()
    say(
        f"[demo] wrote {path} ({len(recorder.frames)} frames, {camera} camera) "
        f"in {time.perf_counter() - started:.0f} s"
    )
    say(f"[demo] final relations: {session.world.relations()}")
    return {"video": str(path), "outcomes": outcomes, "relations": session.world.relations()}
