"""The Code-as-Policies tabletop benchmark: splits, seeded episodes, success checks on
constructed states, the oracle track on a sample of episodes, the LLM tracks (grounding on and
off) from a scripted LLM, and with the real planner on the local model."""

from __future__ import annotations

import dataclasses
import json

import mujoco
import pytest
from support.bench_llm import ScriptedCodeLLM

from lang2policy.bench import cap
from lang2policy.bench.cap_checks import Task, blocks_of
from lang2policy.bench.cap_splits import EPISODE_SPLITS, SEEN, SPLIT_NAMES, SPLITS, UNSEEN
from lang2policy.bench.cap_tasks import FAMILIES, FAMILY_NAMES, family, make_episode
from lang2policy.errors import ConfigError
from lang2policy.sandbox.policy import default_policy
from lang2policy.scene.layout import load_layout
from lang2policy.scene.objects import COLORS
from lang2policy.session.sim import SimSession
from lang2policy.skills.geometry import corner_point


def put(session: SimSession, name: str, x: float, y: float, z: float | None = None) -> None:
    """Set an object's pose directly (upright, still); z defaults to resting on the table."""
    world = session.world
    handle = world.handle(name)
    if z is None:
        z = world.description.objects.block_half + 1e-4 if name.endswith("block") else 1e-4
    world.data.qpos[handle.qpos_adr : handle.qpos_adr + 7] = (x, y, z, 1.0, 0.0, 0.0, 0.0)
    world.data.qvel[handle.qvel_adr : handle.qvel_adr + 6] = 0.0
    mujoco.mj_forward(world.model, world.data)


def arrange(session: SimSession, objects: list[str], spots: dict[str, tuple]) -> None:
    """A scene of ``objects`` with some of them moved to ``spots`` (name -> (x, y[, z]))."""
    session.reset(0, objects)
    parked = iter([(-0.3, 0.3 - 0.1 * i) for i in range(10)])
    for name in objects:  # clear the table first so nothing overlaps the arrangement
        put(session, name, *next(parked), -0.5)
    for name, spot in spots.items():
        put(session, name, *spot)
    session.world.step_seconds(0.4)


def judge(session: SimSession, name: str, objects, params=None):
    return family(name).check(session.world, Task(tuple(objects), params or {}))


# ----------------------------------------------------------------------------- splits
def test_attribute_splits_are_disjoint_and_exist():
    assert not set(SEEN.colors) & set(UNSEEN.colors)
    assert not set(SEEN.places) & set(UNSEEN.places)
    assert not set(SEEN.places.values()) & set(UNSEEN.places.values())
    assert not set(SEEN.directions) & set(UNSEEN.directions)
    assert not set(SEEN.lines) & set(UNSEEN.lines)
    layout_colors = set(load_layout("cap_tabletop").colors)
    assert set(SEEN.colors) | set(UNSEEN.colors) <= layout_colors <= set(COLORS)
    assert len(SEEN.colors) == len(UNSEEN.colors) == 5


def test_phrasings_are_disjoint_and_every_split_is_used():
    assert sorted(s.name for s in EPISODE_SPLITS) == sorted(SPLIT_NAMES)
    assert len(FAMILY_NAMES) == len(set(FAMILY_NAMES))
    for f in FAMILIES:
        assert f.seen_phrasings and f.unseen_phrasings
        assert not set(f.seen_phrasings) & set(f.unseen_phrasings), f.name
    # one representative of each kind of task from the CaP benchmark
    assert {"matching_bowls", "stack_all", "line", "beside_bowl", "corner"} <= set(FAMILY_NAMES)


def test_episodes_are_seeded_and_draw_from_their_split(session):
    for f in FAMILIES:
        for index in range(4):
            episode = make_episode(session, f, 7, index)
            again = make_episode(session, f, 7, index)
            assert (episode.instruction, episode.reset_seed, episode.objects) == (
                again.instruction,
                again.reset_seed,
                again.objects,
            )
            split = next(s for s in SPLITS if s.name == episode.split)
            attrs, other = (UNSEEN, SEEN) if split.unseen_attributes else (SEEN, UNSEEN)
            assert {n.split()[0] for n in episode.objects} <= set(attrs.colors)
            words = set(episode.instruction.replace(",", " ").split())
            assert not words & set(other.colors), episode.instruction
            assert episode.template in f.phrasings(split)
            assert len(episode.objects) <= session.world.description.workspace.max_objects
            # the drawn scene does not satisfy the task already
            session.reset(episode.reset_seed, list(episode.objects))
            assert not f.check(session.world, Task(episode.objects, episode.params)).success
    assert (
        make_episode(session, FAMILIES[0], 8, 0).reset_seed
        != make_episode(session, FAMILIES[0], 7, 0).reset_seed
    )


def test_unknown_family_and_nothing_to_run():
    with pytest.raises(ConfigError, match="valid"):
        family("juggle")
    with pytest.raises(ConfigError, match="nothing to run"):
        cap.run("so101", None, 1, 0, oracle=False, progress=False)


# ----------------------------------------------------------------------------- checks
BOWL_IN = 0.008 + 0.0125 + 0.001  # a block's centre height resting in an SO-101 bowl


def test_pick_place_check(session):
    objects = ["red block", "green block", "blue bowl", "yellow bowl"]
    params = {"block": "red block", "bowl": "blue bowl"}
    base = {"blue bowl": (0.2, 0.08), "yellow bowl": (0.2, -0.08)}
    arrange(session, objects, {**base, "red block": (0.2, -0.08, BOWL_IN)})  # wrong bowl
    assert not judge(session, "pick_place", objects, params).success
    arrange(session, objects, {**base, "green block": (0.2, 0.08, BOWL_IN)})  # wrong block
    assert not judge(session, "pick_place", objects, params).success
    arrange(session, objects, {**base, "red block": (0.2, 0.135)})  # beside the bowl
    assert not judge(session, "pick_place", objects, params).success
    arrange(session, objects, {**base, "red block": (0.2, 0.08, BOWL_IN)})
    assert judge(session, "pick_place", objects, params).success


def test_matching_and_all_in_bowl_checks(session):
    objects = ["red block", "green block", "red bowl", "green bowl"]
    bowls = {"red bowl": (0.2, 0.08), "green bowl": (0.2, -0.08)}
    swapped = {"red block": (0.2, -0.08, BOWL_IN), "green block": (0.2, 0.08, BOWL_IN)}
    arrange(session, objects, {**bowls, **swapped})
    assert not judge(session, "matching_bowls", objects).success
    one = {"red block": (0.2, 0.08, BOWL_IN), "green block": (0.15, 0.0)}
    arrange(session, objects, {**bowls, **one})
    assert not judge(session, "matching_bowls", objects).success
    assert not judge(session, "all_in_bowl", objects, {"bowl": "red bowl"}).success
    right = {"red block": (0.2, 0.08, BOWL_IN), "green block": (0.2, -0.08, BOWL_IN)}
    arrange(session, objects, {**bowls, **right})
    assert judge(session, "matching_bowls", objects).success
    assert not judge(session, "all_in_bowl", objects, {"bowl": "red bowl"}).success
    both = {"red block": (0.2, 0.063, BOWL_IN), "green block": (0.2, 0.097, BOWL_IN)}
    arrange(session, objects, {**bowls, **both})
    assert judge(session, "all_in_bowl", objects, {"bowl": "red bowl"}).success
    assert not judge(session, "all_in_bowl", objects, {"bowl": "green bowl"}).success


def test_stack_check(session):
    objects = ["red block", "green block", "blue block"]
    h = session.world.description.objects.block_half
    tower = {"red block": (0.2, -0.05, h), "green block": (0.2, -0.05, 3 * h + 1e-3)}
    arrange(session, objects, {**tower, "blue block": (0.2, -0.05, 5 * h + 2e-3)})
    assert judge(session, "stack_all", objects).success
    arrange(session, objects, {**tower, "blue block": (0.2, 0.05)})  # two left out of one
    result = judge(session, "stack_all", objects)
    assert not result.success and "tower" in result.reason
    two = {"red block": (0.2, -0.05), "green block": (0.2, 0.05), "blue block": (0.15, 0.0)}
    arrange(session, objects, two)
    assert not judge(session, "stack_all", objects).success


def test_corner_check(session):
    objects = ["red block", "green block"]
    description = session.world.description
    params = {"block": "red block", "corner": "top left", "place": "the top left corner"}
    x, y, _ = corner_point(description, "top left")
    arrange(session, objects, {"red block": (x, y)})
    assert judge(session, "corner", objects, params).success
    x, y, _ = corner_point(description, "top right")
    arrange(session, objects, {"red block": (x, y)})
    assert not judge(session, "corner", objects, params).success
    x, y, _ = corner_point(description, "top left")
    arrange(session, objects, {"green block": (x, y), "red block": (0.2, 0.0)})
    assert not judge(session, "corner", objects, params).success


def test_beside_bowl_check(session):
    objects = ["red block", "blue bowl"]
    params = {"block": "red block", "bowl": "blue bowl", "direction": "left"}
    bowl = {"blue bowl": (0.2, 0.0)}
    arrange(session, objects, {**bowl, "red block": (0.2, 0.075)})  # left = +y
    assert judge(session, "beside_bowl", objects, params).success
    for wrong in [(0.2, -0.075), (0.27, 0.0), (0.2, 0.0, BOWL_IN), (0.15, 0.19)]:
        arrange(session, objects, {**bowl, "red block": wrong})
        assert not judge(session, "beside_bowl", objects, params).success, wrong
    top = {**params, "direction": "top"}  # top = +x, the far side
    arrange(session, objects, {**bowl, "red block": (0.275, 0.0)})
    assert judge(session, "beside_bowl", objects, top).success
    assert not judge(session, "beside_bowl", objects, params).success


def test_line_check(session):
    objects = ["red block", "green block", "blue block"]
    names = blocks_of(objects)
    horizontal = {"line": "horizontal"}
    row = dict(zip(names, [(0.2, -0.06), (0.2, 0.0), (0.2, 0.06)], strict=True))
    arrange(session, objects, row)
    assert judge(session, "line", objects, horizontal).success
    assert not judge(session, "line", objects, {"line": "vertical"}).success
    assert not judge(session, "line", objects, {"line": "diagonal"}).success
    column = dict(zip(names, [(0.15, 0.0), (0.2, 0.0), (0.25, 0.0)], strict=True))
    arrange(session, objects, column)
    assert not judge(session, "line", objects, horizontal).success
    assert judge(session, "line", objects, {"line": "vertical"}).success
    diagonal = dict(zip(names, [(0.16, -0.04), (0.2, 0.0), (0.24, 0.04)], strict=True))
    arrange(session, objects, diagonal)
    assert judge(session, "line", objects, {"line": "diagonal"}).success
    bent = dict(zip(names, [(0.2, -0.06), (0.2, 0.0), (0.24, 0.06)], strict=True))
    arrange(session, objects, bent)
    assert not judge(session, "line", objects, horizontal).success
    touching = dict(zip(names, [(0.2, -0.06), (0.2, 0.0), (0.2, 0.02)], strict=True))
    arrange(session, objects, touching)
    assert not judge(session, "line", objects, horizontal).success


def test_a_wrong_program_fails_the_check(session):
    """Run a plausible but wrong program through the sandbox: the check must say no."""
    episode = make_episode(session, family("pick_place"), 0, 0)
    other = next(n for n in episode.objects if n.endswith("bowl") and n != episode.params["bowl"])
    wrong = episode.reference.replace(repr(episode.params["bowl"]), repr(other))
    assert wrong != episode.reference
    policy = default_policy(session.world.description)
    result = cap.run_oracle(session, dataclasses.replace(episode, reference=wrong), policy)
    assert result["outcome"] == "ok" and not result["success"], result
    assert "not in the" in result["reason"]


# ----------------------------------------------------------------------------- tracks
def test_oracle_track_on_a_sample():
    """Two episodes per family (seen and unseen attributes and phrasings) on SO-101."""
    report = cap.run("so101", None, episodes=2, seed=0, oracle=True, progress=False)
    assert report["tracks"] == ["oracle"]
    assert report["oracle"]["episodes"] == 2 * len(FAMILIES)
    assert report["oracle"]["success_rate"] >= 0.9, cap.format_text(report)
    assert [f["family"] for f in report["families"]] == list(FAMILY_NAMES)
    assert set(report["splits"]) == {"SA-SI", "UA-UI"}
    text = cap.format_text(report)
    for name in FAMILY_NAMES:
        assert name in text
    assert "SA-SI" in text and "UA-UI" in text
    json.dumps(report)


def test_llm_tracks_with_grounding_on_and_off_side_by_side():
    """Both grounding settings on the same episodes, from a scripted LLM that answers each
    instruction with its reference program: both LLM tracks per family, split and phrasing,
    with planning latency, in the report and the text."""
    with_scenes = SimSession("so101")
    episodes = cap.make_episodes(with_scenes, 2, 0, ["pick_place"])
    llm = ScriptedCodeLLM({e.instruction: e.reference for e in episodes})
    report = cap.run("so101", "scripted", 2, 0, progress=False, families=["pick_place"], client=llm)
    assert report["tracks"] == ["oracle", "llm", "llm-off"]
    assert [r["instruction"] for r in report["episodes"]] == [e.instruction for e in episodes]
    for track in ("llm", "llm-off"):
        assert report[track]["successes"] == 2, cap.format_text(report)
        assert set(report["phrasings"]) == {"SI", "UI"}
        assert report["phrasings"]["UI"][track]["episodes"] == 1
        assert report["families"][0]["phrasings"]["SI"][track]["successes"] == 1
        summary = report["llm_summary"][track]
        assert summary["latency"]["llm_seconds"]["p50"] > 0
        assert summary["latency"]["planning_seconds"]["p90"] > 0
        assert summary["verdicts"] == {"goal_reached": 2}
    text = cap.format_text(report)
    assert "LLM tracks by phrasing split" in text
    grounding_table = text[text.index("LLM tracks by phrasing split") :]
    assert "llm-off" in grounding_table.splitlines()[1]
    assert "pick_place" in grounding_table and "2/2 100%" in grounding_table
    assert "llm: planning per instruction: LLM p50" in text
    assert "llm-off: planning per instruction: LLM p50" in text
    json.dumps(report)
    off_only = cap.run(
        "so101",
        "scripted",
        1,
        0,
        oracle=False,
        progress=False,
        families=["pick_place"],
        grounding="off",
        client=llm,
    )
    assert off_only["tracks"] == ["llm-off"] and "llm" not in off_only["episodes"][0]
    with pytest.raises(ConfigError, match="grounding"):
        cap.run("so101", "scripted", 1, 0, progress=False, grounding="maybe", client=llm)


@pytest.mark.llm
@pytest.mark.slow
def test_llm_track_runs_the_real_planner_on_the_local_model():
    """The tracks on the same episodes: the real planner with the local Gemma model, grounded
    and not, beside the reference programs (only the wiring and the records are asserted)."""
    report = cap.run(
        "so101", "local", episodes=1, seed=0, oracle=True, progress=False, families=["pick_place"]
    )
    assert report["tracks"] == ["oracle", "llm", "llm-off"]
    assert report["oracle"]["successes"] == 1
    for track in ("llm", "llm-off"):
        record = report["episodes"][0][track]
        assert record["llm_calls"] >= 1 and record["code"]
        assert isinstance(record["success"], bool)
        assert report["llm_summary"][track]["mean_llm_calls"] >= 1
    assert report["llm_spec"] == "local"
    text = cap.format_text(report)
    assert "LLM local" in text.splitlines()[0]
    json.dumps(report)


# ----------------------------------------------------------------------------- executors
TIMINGS = {"wall_seconds", "planning_seconds", "llm_seconds", "latency", "mean_planning_seconds"}


def untimed(report):
    """The report without its wall-clock figures (what differs from run to run)."""
    if isinstance(report, dict):
        return {k: untimed(v) for k, v in report.items() if k not in TIMINGS}
    if isinstance(report, list):
        return [untimed(v) for v in report]
    return report


@pytest.mark.slow
def test_the_oracle_track_is_the_same_in_process_on_the_pool_and_on_ray(capsys):
    """Episodes seeded per index: 4 oracle episodes give the same report run here, on 2 local
    worker processes and on a real local Ray cluster of 2 workers (timings aside)."""
    pytest.importorskip("ray")
    from lang2policy.cli import main

    here = cap.run("so101", None, 2, 3, progress=False, families=["pick_place", "corner"])
    command = ["bench", "cap", "--episodes", "2", "--seed", "3", "--families",
               "pick_place,corner", "--workers", "2", "--json"]  # fmt: skip
    for executor in ("local", "ray"):
        assert main([*command, "--executor", executor]) == 0
        report = json.loads(capsys.readouterr().out)
        assert len(report["episodes"]) == 4
        assert untimed(report) == untimed(here), executor


@pytest.mark.slow
def test_the_llm_tracks_run_in_workers_on_a_copy_of_the_client():
    """The scripted LLM copied to 2 local workers: the same records and counts as here."""
    from lang2policy.parallel.executor import Executor

    episodes = cap.make_episodes(SimSession("so101"), 2, 0, ["pick_place"])
    llm = ScriptedCodeLLM({e.instruction: e.reference for e in episodes})
    seen = []
    runs = [
        cap.run("so101", "scripted", 2, 0, oracle=False, progress=False, families=["pick_place"],
                client=llm, grounding="on", executor=executor, on_episode=seen.append)
        for executor in (None, Executor("local", 2))
    ]  # fmt: skip
    assert runs[1]["tracks"] == ["llm"] and runs[1]["llm"]["successes"] == 2
    assert untimed(runs[1]) == untimed(runs[0])
    assert [r["instruction"] for r in seen] == [e.instruction for e in episodes] * 2
    with pytest.raises(ConfigError, match="nothing to run"):
        cap.run("so101", None, 1, 0, oracle=False, progress=False, executor=Executor("local", 2))


def test_the_camera_route_stays_in_this_process():
    from lang2policy.parallel.executor import Executor

    with pytest.raises(ConfigError, match="the camera route runs in this process"):
        cap.run("so101", None, 1, 0, progress=False, camera=object(), executor=Executor("ray", 2))
