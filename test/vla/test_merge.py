"""Shards merged into one LeRobot v3 dataset (lang2policy.vla.dataset.merge), on real files.

Five small episodes (two cameras, real H.264, a scene state, three tasks first used in a
different order in each shard) are written once as one dataset and once as three shards; the
shards are merged. The merged dataset reads back as the shards' frames in order, with episode,
frame and task indices re-based, stats equal to the single dataset's, and the same bytes on a
second merge; shards that differ in fps or features are refused with what differs. Last,
``record demos --shard-size`` against the default path on the same seeds.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lang2policy.errors import Lang2PolicyError
from lang2policy.vla.dataset import DatasetWriter, EpisodeRecord, load_dataset, load_meta
from lang2policy.vla.dataset.merge import merge_datasets
from lang2policy.vla.spec.schema import STATE_NAMES

SIZE = 32  # small square frames: quick to encode and decode
LENGTHS = (6, 9, 4, 7, 5)
TASKS = ("lift the red block", "push the green block left", "put the blue block in the bowl")
TASK_OF = (0, 1, 2, 0, 1)  # shard 2 first uses task 2, then 0: its own task indices differ
SHARDS = ((0, 1), (2, 3), (4,))
ENV = ("block_x", "block_y")


def merge_records() -> list[EpisodeRecord]:
    rng = np.random.default_rng(5)
    records = []
    for index, length in enumerate(LENGTHS):
        state = np.cumsum(rng.normal(0, 0.05, (length, len(STATE_NAMES))), axis=0)
        y, x = np.mgrid[0:SIZE, 0:SIZE] / SIZE
        t = np.arange(length)[:, None, None, None] * 0.05
        wave = 127 + 100 * np.sin(2 * np.pi * (x[..., None] + y[..., None] * [1, 2, 3] + t))
        records.append(
            EpisodeRecord(
                task=TASKS[TASK_OF[index]],
                images={"front": wave.astype(np.uint8), "wrist": wave[:, ::-1].astype(np.uint8)},
                state=state.astype(np.float32),
                action=(state + rng.normal(0, 0.01, state.shape)).astype(np.float32),
                extra={"success": index != 2, "seed": 100 + index},
                environment=rng.normal(0, 1, (length, len(ENV))).astype(np.float32),
            )
        )
    return records


def write(root: Path, records: list[EpisodeRecord], fps: int = 10, **settings) -> Path:
    settings = {"cameras": ("front", "wrist"), "image_size": SIZE, **settings}
    with DatasetWriter(root, fps=fps, extra_episode_columns=("success", "seed"),
                       environment_names=ENV, **settings) as writer:  # fmt: skip
        for record in records:
            writer.add_episode(record)
    return root


@pytest.fixture(scope="module")
def shard_set(tmp_path_factory) -> dict:
    """The shards, their merge, and one dataset written with all the episodes."""
    base = tmp_path_factory.mktemp("merge")
    records = merge_records()
    shards = [
        write(base / f"shard-{n}", [records[i] for i in episodes])
        for n, episodes in enumerate(SHARDS)
    ]
    return {
        "shards": shards,
        "merged": merge_datasets(shards, base / "merged"),
        "single": write(base / "single", records),
        "base": base,
    }


def test_merged_frames_are_the_shards_frames_in_order(shard_set):
    merged = load_dataset(shard_set["merged"])
    parts = [load_dataset(shard) for shard in shard_set["shards"]]
    for name in ("state", "action", "environment", "frame_index", "timestamp"):
        expected = np.concatenate([getattr(part, name) for part in parts])
        np.testing.assert_array_equal(getattr(merged, name), expected)
    for camera in ("front", "wrist"):  # copied, not re-encoded: the very same decoded pixels
        expected = np.concatenate([part.images[camera] for part in parts])
        np.testing.assert_array_equal(merged.images[camera], expected)
    frame_tasks = [merged.tasks[t] for t in merged.task_index]
    assert frame_tasks == [p.tasks[t] for p in parts for t in p.task_index]
    assert [e["length"] for e in merged.episodes] == list(LENGTHS)
    assert [(e["task"], e["success"], e["seed"]) for e in merged.episodes] == [
        (e["task"], e["success"], e["seed"]) for p in parts for e in p.episodes
    ]


def test_indices_are_rebased_and_tasks_united_in_first_seen_order(shard_set):
    merged, single = load_dataset(shard_set["merged"]), load_dataset(shard_set["single"])
    assert merged.tasks == list(TASKS) == single.tasks
    np.testing.assert_array_equal(merged.task_index, single.task_index)
    np.testing.assert_array_equal(merged.episode_index, single.episode_index)
    assert [e["index"] for e in merged.episodes] == list(range(len(LENGTHS)))
    bounds = np.cumsum((0, *LENGTHS))
    assert [(e["from"], e["to"]) for e in merged.episodes] == list(
        zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True)
    )
    meta = load_meta(shard_set["merged"])
    assert (meta.info["total_episodes"], meta.total_frames, meta.info["total_tasks"]) == (
        len(LENGTHS), sum(LENGTHS), len(TASKS),
    )  # fmt: skip
    # each shard's files are further files of chunk 0; the rows say which
    files = [(row["data/file_index"], row["videos/observation.images.front/file_index"])
             for row in meta.episodes]  # fmt: skip
    assert files == [(0, 0), (0, 0), (1, 1), (1, 1), (2, 2)]
    for kind in ("data", "videos/observation.images.front", "videos/observation.images.wrist"):
        found = sorted(p.name for p in (shard_set["merged"] / kind / "chunk-000").iterdir())
        assert found == [f"file-00{n}.{'parquet' if kind == 'data' else 'mp4'}" for n in range(3)]


def test_stats_equal_those_of_one_dataset_with_every_episode(shard_set):
    merged, single = load_meta(shard_set["merged"]).stats, load_meta(shard_set["single"]).stats
    assert list(merged) == list(single)
    for key, feature in single.items():
        assert list(merged[key]) == list(feature), key
        for name, value in feature.items():
            np.testing.assert_allclose(merged[key][name], value, rtol=1e-12, err_msg=key + name)
    assert merged["index"]["max"][0] == sum(LENGTHS) - 1  # re-based, not pooled shard stats
    assert merged["episode_index"]["max"][0] == len(LENGTHS) - 1


def test_a_second_merge_writes_the_same_bytes(shard_set, tmp_path):
    again = merge_datasets(shard_set["shards"], tmp_path / "again")

    def files(root: Path) -> dict[str, bytes]:
        return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}

    assert files(again) == files(shard_set["merged"])


def test_shards_that_differ_are_refused_naming_the_difference(shard_set, tmp_path):
    records = merge_records()[:1]
    other_fps = write(tmp_path / "fps", records, fps=20)
    with pytest.raises(Lang2PolicyError, match=r"fps: 10 vs 20.*may differ"):
        merge_datasets([shard_set["shards"][0], other_fps], tmp_path / "out")
    one_camera = write(tmp_path / "camera", [
        EpisodeRecord(r.task, {"front": r.images["front"]}, r.state, r.action, r.extra,
                      r.environment) for r in records
    ], cameras=("front",))  # fmt: skip
    with pytest.raises(Lang2PolicyError, match=r"feature 'observation.images.wrist' only in"):
        merge_datasets([shard_set["shards"][0], one_camera], tmp_path / "out")
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.part").exists()
    with pytest.raises(Lang2PolicyError, match="not an empty directory"):
        merge_datasets(shard_set["shards"], shard_set["merged"])


def test_record_demos_in_shards_writes_the_default_paths_frames(tmp_path):
    from lang2policy.cli import main

    argv = ["record", "demos", "--task-family", "lift", "--episodes", "2", "--views", "1",
            "--workers", "0"]  # fmt: skip
    assert main([*argv, "--out", str(tmp_path / "default")]) == 0
    sharded = tmp_path / "sharded"
    assert main([*argv, "--out", str(sharded), "--shard-size", "2"]) == 0
    assert not (tmp_path / "sharded.shards").exists()  # the shards are removed once merged
    default, merged = load_dataset(tmp_path / "default"), load_dataset(sharded)
    for name in ("state", "action", "environment", "episode_index", "task_index", "timestamp"):
        np.testing.assert_array_equal(getattr(merged, name), getattr(default, name))
    assert merged.tasks == default.tasks
    assert merged.episodes == [{**e} for e in default.episodes]
    for camera in default.images:  # encoded in two files, not one: H.264 within its error
        error = np.abs(merged.images[camera].astype(int) - default.images[camera].astype(int))
        assert error.mean() < 2.0, camera
    assert len(list((sharded / "data" / "chunk-000").iterdir())) == 2


def test_a_failed_shard_leaves_neither_the_dataset_nor_the_shards(tmp_path, monkeypatch, capsys):
    from lang2policy.cli import main
    from lang2policy.vla.sim import demos

    monkeypatch.setattr(demos, "worker_state", lambda realism: None)  # no simulation needed
    monkeypatch.setattr(demos, "record_or_error", lambda state, spec: (spec, "RuntimeError: x"))
    out = tmp_path / "demos"
    argv = ["record", "demos", "--task-family", "lift", "--episodes", "2", "--workers", "0",
            "--out", str(out)]  # fmt: skip
    assert main([*argv, "--shard-size", "1"]) == 2
    assert "episode 0" in capsys.readouterr().err
    assert not out.exists() and not (tmp_path / "demos.shards").exists()
    assert main([*argv, "--shard-size", "-1"]) == 2
    assert "--shard-size must be 0 (off) or more" in capsys.readouterr().err
