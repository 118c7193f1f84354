"""The LeRobotDataset v3.0 writer and reader (lang2policy.vla.dataset), on real files.

A small dataset of three episodes with smooth, moving images is written (real H.264 encode),
read back (real decode) and compared with what went in: state/action exactly, images within a
small error, episode boundaries, tasks, stats against numpy's over the same data, info.json and
the parquet schemas against LeRobot's conventions. Then broken inputs and broken datasets.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import imageio_ffmpeg
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.episodes import blank_episode

from lang2policy.errors import Lang2PolicyError
from lang2policy.vla.dataset import (
    DatasetWriter,
    EpisodeRecord,
    load_dataset,
    load_meta,
    summarize,
)
from lang2policy.vla.dataset.stats import image_stats
from lang2policy.vla.dataset.summary import format_text
from lang2policy.vla.dataset.video import VideoEncoder
from lang2policy.vla.spec.schema import CAMERAS, ENV_KEY, IMAGE_SIZE, SIM_ENV_KEY, STATE_NAMES

LENGTHS = (30, 45, 20)
TASK_OF = ("put the red block in the blue bowl", "push the green block left")
EXTRA = ("success", "family", "split", "seed")
# Mean and 99th-percentile absolute error (0..255) allowed after the H.264 round trip; the
# smooth test images measure about 1.0 and 4 (96x96, CRF 10, yuv420p).
MEAN_ERROR, P99_ERROR = 2.0, 10


def smooth_images(length: int, phase: float) -> np.ndarray:
    """Moving colour waves: smooth like a rendered scene, different in every frame."""
    y, x = np.mgrid[0:IMAGE_SIZE, 0:IMAGE_SIZE] / IMAGE_SIZE
    t = np.arange(length)[:, None, None] * 0.007
    channels = [
        127 + 100 * np.sin(2 * np.pi * (x * (c + 1) + y * (2 - c) + t + phase + c))
        for c in range(3)
    ]
    return np.stack(channels, axis=-1).astype(np.uint8)


def make_records() -> list[EpisodeRecord]:
    rng = np.random.default_rng(17)
    records = []
    for index, length in enumerate(LENGTHS):
        state = np.cumsum(rng.normal(0, 0.05, (length, len(STATE_NAMES))), axis=0)
        records.append(
            EpisodeRecord(
                task=TASK_OF[index % 2],
                images={
                    "front": smooth_images(length, 0.37 * index),
                    "wrist": smooth_images(length, 0.2 + 0.37 * index)[:, ::-1].copy(),
                },
                state=state.astype(np.float32),
                action=(state + rng.normal(0, 0.01, state.shape)).astype(np.float32),
                extra={
                    "success": index != 1,
                    "family": ("pick_place", "push")[index % 2],
                    "split": "train" if index < 2 else "val",
                    "seed": 100 + index,
                },
            )
        )
    return records


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> tuple[Path, list[EpisodeRecord]]:
    root = tmp_path_factory.mktemp("vla") / "demos"
    records = make_records()
    with DatasetWriter(root, extra_episode_columns=EXTRA) as writer:
        for record in records:
            writer.add_episode(record)
    return root, records


@pytest.fixture(scope="module")
def dataset(written):
    return load_dataset(written[0])


# --------------------------------------------------------------------- round trip
def test_state_action_and_episode_boundaries_round_trip(written, dataset):
    _, records = written
    assert len(dataset) == sum(LENGTHS) and dataset.fps == 10
    starts = np.cumsum([0, *LENGTHS])
    for index, (record, episode) in enumerate(zip(records, dataset.episodes, strict=True)):
        rows = slice(starts[index], starts[index + 1])
        assert (episode["index"], episode["from"], episode["to"]) == (
            index,
            starts[index],
            starts[index + 1],
        )
        assert episode["length"] == LENGTHS[index] and episode["task"] == record.task
        assert {k: episode[k] for k in EXTRA} == record.extra
        np.testing.assert_array_equal(dataset.state[rows], record.state)
        np.testing.assert_array_equal(dataset.action[rows], record.action)
        assert (dataset.episode_index[rows] == index).all()
        np.testing.assert_array_equal(dataset.frame_index[rows], np.arange(LENGTHS[index]))
        np.testing.assert_allclose(dataset.timestamp[rows], np.arange(LENGTHS[index]) / 10)
    assert dataset.state.dtype == np.float32 and dataset.episode_index.dtype == np.int64


def test_images_come_back_close_to_the_originals(written, dataset):
    _, records = written
    assert dataset.cameras == list(CAMERAS)
    for camera in CAMERAS:
        original = np.concatenate([r.images[camera] for r in records])
        decoded = dataset.images[camera]
        assert decoded.shape == original.shape and decoded.dtype == np.uint8
        error = np.abs(decoded.astype(int) - original.astype(int))
        assert error.mean() < MEAN_ERROR and np.percentile(error, 99) <= P99_ERROR, (
            camera,
            error.mean(),
            np.percentile(error, 99),
        )
    # Frames land in their own place: each decoded frame is nearest its own original.
    front = np.concatenate([r.images["front"] for r in records]).astype(int)
    for row in (0, 29, 30, 74, 75, 94):
        distances = np.abs(front - dataset.images["front"][row].astype(int)).mean(axis=(1, 2, 3))
        assert int(np.argmin(distances)) == row


def test_tasks_table_and_task_index(dataset):
    assert dataset.tasks == list(TASK_OF)
    np.testing.assert_array_equal(dataset.task_index, np.repeat([0, 1, 0], LENGTHS))


def test_stats_are_numpys_over_all_frames(written, dataset):
    _, records = written
    for key, values in (
        ("observation.state", np.concatenate([r.state for r in records])),
        ("action", np.concatenate([r.action for r in records])),
    ):
        stats = dataset.stats[key]
        np.testing.assert_allclose(stats["mean"], values.mean(0, dtype=np.float64), rtol=1e-6)
        np.testing.assert_allclose(stats["std"], values.std(0, dtype=np.float64), rtol=1e-5)
        np.testing.assert_allclose(stats["min"], values.min(0))
        np.testing.assert_allclose(stats["max"], values.max(0))
        assert stats["count"].tolist() == [sum(LENGTHS)]
    pixels = np.concatenate([r.images["wrist"] for r in records]).reshape(-1, 3) / 255.0
    wrist = dataset.stats["observation.images.wrist"]
    assert wrist["mean"].shape == (3, 1, 1) and wrist["count"].tolist() == [sum(LENGTHS)]
    np.testing.assert_allclose(wrist["mean"].ravel(), pixels.mean(0), rtol=1e-9)
    np.testing.assert_allclose(wrist["std"].ravel(), pixels.std(0), rtol=1e-9)
    np.testing.assert_allclose(wrist["max"].ravel(), pixels.max(0))
    index = dataset.stats["frame_index"]
    assert index["max"].tolist() == [44.0] and index["min"].tolist() == [0.0]


def test_stats_carry_the_quantiles_lerobots_normalisers_read(written, dataset):
    _, records = written
    action = dataset.stats["action"]
    weights = np.array([len(r.action) for r in records], float)[:, None]
    for name, q in (("q01", 0.01), ("q10", 0.1), ("q50", 0.5), ("q90", 0.9), ("q99", 0.99)):
        # pooled as LeRobot pools them: the episodes' quantiles weighted by their frames
        per_episode = np.stack([np.quantile(r.action.astype(np.float64), q, axis=0)
                                for r in records])  # fmt: skip
        expected = (per_episode * weights).sum(0) / weights.sum()
        np.testing.assert_allclose(action[name], expected, rtol=1e-6, atol=1e-9)
        wrist = dataset.stats["observation.images.wrist"][name]
        assert wrist.shape == (3, 1, 1) and 0.0 <= wrist.min() <= wrist.max() <= 1.0
    assert np.all(action["q01"] <= action["q50"]) and np.all(action["q50"] <= action["q99"])
    first = records[0].images["wrist"].reshape(-1, 3).astype(np.float64)  # an episode's image
    np.testing.assert_allclose(image_stats(records[0].images["wrist"])["q90"].ravel(),
                               np.quantile(first, 0.9, axis=0) / 255.0)  # fmt: skip


def test_info_json_fields(written):
    root, _ = written
    info = json.loads((root / "meta/info.json").read_text())
    assert info["codebase_version"] == "v3.0" and info["robot_type"] == "so101"
    assert (info["fps"], info["total_episodes"], info["total_frames"], info["total_tasks"]) == (
        10,
        3,
        sum(LENGTHS),
        2,
    )
    assert info["chunks_size"] == 1000 and info["splits"] == {"train": "0:3"}
    assert info["data_path"] == "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
    assert info["video_path"] == (
        "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
    )
    assert {"data_files_size_in_mb", "video_files_size_in_mb"} <= set(info)
    features = info["features"]
    assert features["observation.state"] == {
        "dtype": "float32",
        "shape": [6],
        "names": list(STATE_NAMES),
    }
    assert features["action"]["names"] == list(STATE_NAMES)
    front = features["observation.images.front"]
    assert front["dtype"] == "video" and front["shape"] == [96, 96, 3]
    assert front["names"] == ["height", "width", "channels"]
    assert front["info"]["video.codec"] == "h264" and front["info"]["video.pix_fmt"] == "yuv420p"
    assert front["info"]["video.fps"] == 10 and front["info"]["has_audio"] is False
    for key in ("frame_index", "episode_index", "index", "task_index"):
        assert features[key] == {"dtype": "int64", "shape": [1], "names": None}
    assert features["timestamp"]["dtype"] == "float32"


def test_parquet_schemas_follow_lerobot(written):
    root, _ = written
    data = pq.read_schema(root / "data/chunk-000/file-000.parquet")
    assert data.field("observation.state").type == pa.list_(pa.float32(), 6)
    assert data.field("action").type == pa.list_(pa.float32(), 6)
    assert data.field("timestamp").type == pa.float32()
    for name in ("frame_index", "episode_index", "index", "task_index"):
        assert data.field(name).type == pa.int64()
    episodes = pq.read_table(root / "meta/episodes/chunk-000/file-000.parquet")
    schema = episodes.schema
    assert schema.field("tasks").type == pa.list_(pa.string())
    for name in ("episode_index", "length", "data/chunk_index", "data/file_index"):
        assert schema.field(name).type == pa.int64()
    assert schema.field("dataset_from_index").type == pa.int64()
    key = "videos/observation.images.front"
    assert schema.field(f"{key}/from_timestamp").type == pa.float64()
    assert episodes.column(f"{key}/from_timestamp").to_pylist() == [0.0, 3.0, 7.5]
    assert episodes.column(f"{key}/to_timestamp").to_pylist() == [3.0, 7.5, 9.5]
    assert episodes.column("dataset_to_index").to_pylist() == [30, 75, 95]
    assert schema.field("success").type == pa.bool_() and schema.field("seed").type == pa.int64()
    assert episodes.column("stats/action/count").to_pylist() == [[30], [45], [20]]
    tasks = pq.read_table(root / "meta/tasks.parquet")
    assert tasks.column("task").to_pylist() == list(TASK_OF)
    assert tasks.column("task_index").to_pylist() == [0, 1]
    pandas = json.loads(tasks.schema.metadata[b"pandas"])
    assert pandas["index_columns"] == ["task"]  # LeRobot looks tasks up in the frame's index


def test_videos_are_h264_with_every_frame(written):
    root, _ = written
    for camera in CAMERAS:
        path = root / f"videos/observation.images.{camera}/chunk-000/file-000.mp4"
        frames = imageio_ffmpeg.read_frames(str(path))
        meta = next(frames)
        assert meta["codec"].startswith("h264") and meta["pix_fmt"].startswith("yuv420p")
        assert meta["fps"] == 10 and tuple(meta["size"]) == (96, 96)
        assert sum(1 for _ in frames) == sum(LENGTHS)


def test_select_takes_whole_episodes(dataset):
    chosen = dataset.select([2, 0])
    assert [e["index"] for e in chosen.episodes] == [2, 0] and len(chosen) == 50
    assert [(e["from"], e["to"]) for e in chosen.episodes] == [(0, 20), (20, 50)]
    np.testing.assert_array_equal(chosen.state[:20], dataset.state[75:95])
    np.testing.assert_array_equal(chosen.images["wrist"][20:], dataset.images["wrist"][:30])
    np.testing.assert_array_equal(chosen.episode_index, np.repeat([2, 0], [20, 30]))
    with pytest.raises(Lang2PolicyError, match=r"among the 3 held \(0..2\); unknown: \[7\]"):
        dataset.select([0, 7])


def test_summary_counts_success_per_family(written):
    summary = summarize(load_meta(written[0]))
    assert (summary["episodes"], summary["frames"], summary["tasks"]) == (3, 95, 2)
    assert summary["cameras"] == {"front": [96, 96], "wrist": [96, 96]}
    assert summary["success"]["all"] == {"episodes": 3, "succeeded": 2, "rate": 0.667}
    assert summary["success"]["push"] == {"episodes": 1, "succeeded": 0, "rate": 0.0}
    assert summary["splits"] == {"train": 2, "val": 1}
    text = format_text(summary)
    assert "success pick_place: 2/2 (100%)" in text and "shoulder_pan" in text


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"task": " "}, "task must be non-empty text"),
        ({"state": np.zeros((5, 4), np.float32)}, r"state must be \(T, 6\)"),
        ({"action": np.full((5, 6), np.nan, np.float32)}, "action holds NaN"),
        ({"action": np.zeros((4, 6), np.float32)}, "state has 5 frames but its action 4"),
        ({"images": {"front": np.zeros((5, 96, 96, 3), np.uint8)}}, r"cameras \['front'"),
        (
            {"images": {c: np.zeros((5, 64, 64, 3), np.uint8) for c in CAMERAS}},
            r"images must be \(5, 96, 96, 3\)",
        ),
        (
            {"images": {c: np.zeros((5, 96, 96, 3), np.float32) for c in CAMERAS}},
            "images must be uint8",
        ),
        ({"extra": {"success": True, "family": "x"}}, r"unknown: \['family'\]"),
        ({"extra": {}}, r"missing: \['success'\]"),
        ({"extra": {"success": [1]}}, "bool, int, float, str or None"),
    ],
)
def test_bad_episodes_are_refused_whole(tmp_path, changes, message):
    with DatasetWriter(tmp_path / "ds", extra_episode_columns=("success",)) as writer:
        with pytest.raises(Lang2PolicyError, match=message):
            writer.add_episode(blank_episode(**changes))
        writer.add_episode(blank_episode())
    assert load_dataset(tmp_path / "ds").episodes[0]["length"] == 5


def test_writer_refuses_a_used_directory_and_cleans_up_when_abandoned(tmp_path):
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "file").write_text("x")
    with pytest.raises(Lang2PolicyError, match=r"already exists and is not an empty directory"):
        DatasetWriter(tmp_path / "used")
    with pytest.raises(Lang2PolicyError, match=r"not LeRobot's own"):
        DatasetWriter(tmp_path / "a", extra_episode_columns=("length",))
    with DatasetWriter(tmp_path / "c", extra_episode_columns=("success",)) as writer:
        writer.add_episode(blank_episode(extra={"success": None}))
        writer.add_episode(blank_episode(extra={"success": True}))
        with pytest.raises(Lang2PolicyError, match=r"episode 2: .*'success': \('bool', 'text'\)"):
            writer.add_episode(blank_episode(extra={"success": "yes"}))
    assert [e["success"] for e in load_dataset(tmp_path / "c").episodes] == [None, True]
    with pytest.raises(RuntimeError), DatasetWriter(tmp_path / "b") as writer:
        writer.add_episode(blank_episode(extra={}))
        raise RuntimeError("a worker died")
    assert not (tmp_path / "b").exists() and not (tmp_path / "b.part").exists()


# --------------------------------------------------------------------- bad datasets
@pytest.fixture
def copy(written, tmp_path) -> Path:
    root = tmp_path / "copy"
    shutil.copytree(written[0], root)
    return root


def test_missing_files_are_named(copy, tmp_path):
    with pytest.raises(Lang2PolicyError, match=r"no dataset at .*nowhere"):
        load_dataset(tmp_path / "nowhere")
    video = copy / "videos/observation.images.wrist/chunk-000/file-000.mp4"
    video.unlink()
    with pytest.raises(Lang2PolicyError, match=r"video file is missing: expected .*wrist"):
        load_dataset(copy)
    (copy / "meta/tasks.parquet").unlink()
    with pytest.raises(Lang2PolicyError, match=r"meta/tasks.parquet is missing"):
        load_dataset(copy)
    (copy / "meta/info.json").unlink()
    with pytest.raises(Lang2PolicyError, match=r"meta/info.json is missing: expected"):
        load_dataset(copy)


def test_wrong_codebase_version(copy):
    info = json.loads((copy / "meta/info.json").read_text())
    (copy / "meta/info.json").write_text(json.dumps({**info, "codebase_version": "v2.1"}))
    with pytest.raises(Lang2PolicyError, match=r"codebase_version is 'v2.1'.*reads .*'v3.0'"):
        load_dataset(copy)


def test_video_with_missing_frames(copy):
    video = copy / "videos/observation.images.front/chunk-000/file-000.mp4"
    video.unlink()
    encoder = VideoEncoder(video, 96, 10)
    encoder.append(smooth_images(90, 0.0))
    encoder.close()
    with pytest.raises(Lang2PolicyError, match=r"has 90 frames but its episodes need 95"):
        load_dataset(copy)
    assert len(load_dataset(copy, cameras=["wrist"])) == 95  # the other camera is fine


def test_frames_table_that_disagrees_with_info(copy):
    info = json.loads((copy / "meta/info.json").read_text())
    (copy / "meta/info.json").write_text(json.dumps({**info, "total_frames": 96}))
    with pytest.raises(Lang2PolicyError, match=r"says 3 episodes, 96 frames.*3 episodes, 95"):
        load_dataset(copy)


def test_unknown_camera(dataset, written):
    with pytest.raises(Lang2PolicyError, match=r"no camera \['top'\]; it has \['front', 'wrist'"):
        load_dataset(written[0], cameras=["top"])


def test_environment_state_round_trips_and_is_checked(tmp_path):
    names = ("block_x", "goal_x")
    with DatasetWriter(tmp_path / "ds", environment_names=names) as writer:
        with pytest.raises(Lang2PolicyError, match=r"environment state must be \(5, 2\)"):
            writer.add_episode(blank_episode())
        with pytest.raises(Lang2PolicyError, match="NaN or inf"):
            writer.add_episode(blank_episode(environment=np.full((5, 2), np.nan, np.float32)))
        scene = np.arange(10, dtype=np.float32).reshape(5, 2)
        writer.add_episode(blank_episode(environment=scene, extra={}))
        writer.add_episode(blank_episode(environment=scene + 100, extra={}))
    data = load_dataset(tmp_path / "ds")
    np.testing.assert_array_equal(data.environment[:5], scene)
    np.testing.assert_array_equal(data.select([1]).environment, scene + 100)
    features = load_meta(tmp_path / "ds").info["features"]
    assert features["sim.environment_state"]["names"] == list(names)
    # LeRobot's policies take every "observation..." feature as an input (and this one as ACT's
    # scene input), which a real arm cannot give: written under a name they skip
    assert not [key for key in features if key.startswith("observation") and "state" in key
                and key != "observation.state"]  # fmt: skip
    assert data.stats[ENV_KEY] is data.stats[SIM_ENV_KEY]  # the model's normaliser reads it
    with DatasetWriter(tmp_path / "plain") as writer:
        with pytest.raises(Lang2PolicyError, match="has no environment_names"):
            writer.add_episode(blank_episode(environment=scene, extra={}))
        writer.add_episode(blank_episode(extra={}))
    assert load_dataset(tmp_path / "plain").environment is None


def test_datasets_combine_with_shifted_episodes_and_merged_tasks(tmp_path):
    from lang2policy.vla.dataset.combine import concat_datasets

    scene = np.zeros((5, 2), np.float32)
    for name, tasks in (("a", ["lift the red block", "push it"]), ("b", ["push it"])):
        with DatasetWriter(tmp_path / name, environment_names=("x", "y")) as writer:
            for number, task in enumerate(tasks):
                value = {"a": 1.0, "b": 2.0}[name] + number
                writer.add_episode(blank_episode(task=task, extra={}, environment=scene + value,
                                          state=np.full((5, 6), value, np.float32)))  # fmt: skip
    a, b = load_dataset(tmp_path / "a"), load_dataset(tmp_path / "b")
    both = concat_datasets([a, b])
    assert both.tasks == ["lift the red block", "push it"] and len(both) == 15
    assert [e["index"] for e in both.episodes] == [0, 1, 2]
    assert [(e["from"], e["to"]) for e in both.episodes] == [(0, 5), (5, 10), (10, 15)]
    assert both.task_index[10:].tolist() == [1] * 5 and both.episode_index[10:].tolist() == [2] * 5
    np.testing.assert_array_equal(both.environment[10:], b.environment)
    np.testing.assert_array_equal(both.images["front"][10:], b.images["front"])
    assert both.state[12, 0] == 2.0
    with DatasetWriter(tmp_path / "plain") as writer:
        writer.add_episode(blank_episode(extra={}))
    with pytest.raises(Lang2PolicyError, match=r"cannot be combined.*scene state"):
        concat_datasets([a, load_dataset(tmp_path / "plain")])


def test_a_dataset_written_with_the_earlier_scene_state_name_still_reads(tmp_path):
    scene = np.arange(10, dtype=np.float32).reshape(5, 2)
    with DatasetWriter(tmp_path / "ds", environment_names=("block_x", "goal_x")) as writer:
        writer.add_episode(blank_episode(environment=scene, extra={}))
    root = tmp_path / "ds"  # rewrite it as the writer did before: observation.environment_state
    info = json.loads((root / "meta/info.json").read_text())
    info["features"][ENV_KEY] = info["features"].pop(SIM_ENV_KEY)
    (root / "meta/info.json").write_text(json.dumps(info))
    stats = json.loads((root / "meta/stats.json").read_text())
    stats[ENV_KEY] = stats.pop(SIM_ENV_KEY)
    (root / "meta/stats.json").write_text(json.dumps(stats))
    for path in root.glob("data/*/*.parquet"):
        table = pq.read_table(path)
        names = [ENV_KEY if n == SIM_ENV_KEY else n for n in table.column_names]
        pq.write_table(table.rename_columns(names), path)
    data = load_dataset(root)
    np.testing.assert_array_equal(data.environment, scene)
    assert list(data.stats[ENV_KEY]["mean"]) == [4.0, 5.0]
