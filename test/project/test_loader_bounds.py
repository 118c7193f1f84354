"""Every loader refuses a hostile file quickly, in little memory, with one line naming the field
and the limit (the issue "Loaders without bounds").

Each hostile file is built for real: an MCAP chunk whose zstd blocks inflate to 2.2 GB, an
info.json whose paths leave the dataset or pad a field to a billion characters, a deflated
.npz that inflates to 2 GB, a model config.json with absurd sizes, an openpi server answering
43,000 rows under the 1 MiB cap. The real loader runs in a fresh interpreter and is judged by
effect: that process's peak resident memory (under 500 MB), the time of the loader's call
(under 5 s), and an error of the project's own, on one line, naming the field and the limit.
A legitimate file of each kind is loaded in the same process: the limits refuse only attacks.
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
import zstandard
from mcap.data_stream import RecordBuilder
from mcap.records import Channel, Chunk, DataEnd, Footer, Header, Message, Schema
from support.episodes import blank_episode
from support.mcap_story import record_episode
from support.openpi import FakeOpenPI, answer_actions

from lang2policy.errors import PolicyBackendError
from lang2policy.rl.policy_file import MLPPolicy
from lang2policy.vla.backends import RemoteLimits, validate_chunk
from lang2policy.vla.dataset import DatasetWriter
from lang2policy.vla.dataset.mcap_records import MAGIC
from lang2policy.vla.spec.loader_limits import (
    MCAP_MAX_CHUNK_BYTES,
    MCAP_MIN_BUDGET_BYTES,
    PATH_FIELD_MAX_WIDTH,
    REMOTE_MAX_CHUNK_ROWS,
    VLA_MAX_PARAMETERS,
)

MODEL = Path(__file__).resolve().parents[2] / "models" / "vla-so101-tiny"
SECONDS, PEAK_MB = 5.0, 500.0  # the acceptance: each attack ends within, in under
KILL_AFTER = 60.0  # a loader that "runs on" is killed here, and the test fails
BOMB_BYTES = 2_200_000_000  # what the 66 KB MCAP and 2 MB .npz inflate to

# Runs in a fresh interpreter: ``setup`` (imports, not timed), then each case, timed; prints
# one result per case (its seconds, and its error "Type: message" or None if it loaded), then
# the process's peak resident memory in kB (VmHWM: since its exec, so not its parent's).
CHILD = """
import json, sys, time
from lang2policy.errors import Lang2PolicyError
scope = {}
exec(sys.argv[1], scope)
results = []
for code in json.loads(sys.argv[2]):
    start = time.monotonic()
    try:
        exec(code, scope)
        error = None
    except Lang2PolicyError as exc:
        error = f"{type(exc).__name__}: {exc}"
    results.append({"seconds": time.monotonic() - start, "error": error})
status = open("/proc/self/status").read().split("VmHWM:")[1]
print(json.dumps({"results": results, "peak_kb": int(status.split()[0])}))
"""


def run_loader(setup: str, cases: dict[str, str], tmp_path: Path) -> dict[str, dict]:
    """Run ``cases`` (name -> code) after ``setup`` in one fresh interpreter; each result has
    ``seconds`` (under ``SECONDS``) and ``error``; the process's peak resident memory must
    stay under ``PEAK_MB``, and a process still running after ``KILL_AFTER`` s fails."""
    out, err = tmp_path / "child.out", tmp_path / "child.err"
    with open(out, "w") as stdout, open(err, "w") as stderr:
        child = subprocess.run(
            [sys.executable, "-c", CHILD, setup, json.dumps(list(cases.values()))],
            stdout=stdout,
            stderr=stderr,
            timeout=KILL_AFTER,
            check=False,
        )
    assert child.returncode == 0, f"the loader's process failed: {err.read_text()[-2000:]}"
    report = json.loads(out.read_text().splitlines()[-1])
    peak_mb = report["peak_kb"] / 1024
    assert peak_mb < PEAK_MB, f"peak memory {peak_mb:.0f} MB"
    results = dict(zip(cases, report["results"], strict=True))
    for name, result in results.items():
        assert result["seconds"] < SECONDS, f"{name}: took {result['seconds']:.1f} s"
        print(f"{name}: {result['seconds']:.3f} s, process peak {peak_mb:.0f} MB")
    return results


def refused(result: dict, error_type: str, *fragments: str) -> str:
    """The case failed with ``error_type`` on one line holding every fragment."""
    error = result["error"]
    assert error is not None, "the hostile file was accepted"
    assert error.startswith(f"{error_type}: "), error
    assert "\n" not in error, error
    for fragment in fragments:
        assert fragment in error, f"{fragment!r} not in {error!r}"
    return error


# --------------------------------------------------------------------- MCAP
def zstd_zeros(size: int) -> bytes:
    """A zstd frame of RLE blocks (4 bytes per 128 KiB of zeros) with no content size in its
    header: the decoder learns its size only by inflating it (2.2 GB in 67 KB)."""
    block = 128 * 1024
    header = struct.pack("<I", 0xFD2FB528) + bytes([0x00, 0x38])  # no size; window 128 KiB
    count, rest = divmod(size, block)
    sizes = [block] * count + ([rest] if rest else [])
    blocks = b"".join(
        ((n << 3) | (1 << 1) | (i == len(sizes) - 1)).to_bytes(3, "little") + b"\0"
        for i, n in enumerate(sizes)
    )
    return header + blocks


def mcap_file(path: Path, chunks: list[tuple[bytes, int]]) -> Path:
    """An MCAP file with channels /joint_states (1) and /tf (2) and ``chunks`` (zstd data,
    declared size)."""
    records = RecordBuilder()
    Header(profile="ros2", library="hostile").write(records)
    Schema(id=1, name="sensor_msgs/msg/JointState", encoding="ros2msg", data=b"").write(records)
    for channel, topic in enumerate(("/joint_states", "/tf"), start=1):
        Channel(id=channel, schema_id=1, topic=topic, message_encoding="cdr", metadata={}).write(
            records
        )
    for data, declared in chunks:
        Chunk("zstd", data, 0, 0, 0, declared).write(records)
    DataEnd(data_section_crc=0).write(records)
    Footer(summary_start=0, summary_offset_start=0, summary_crc=0).write(records)
    path.write_bytes(MAGIC + records.end() + MAGIC)
    return path


def valid_records(size: int) -> bytes:
    """Real message records on /tf, ``size`` bytes of them, zstd-compressed."""
    one = RecordBuilder()
    Message(channel_id=2, log_time=1, data=b"x" * 1000, publish_time=1, sequence=0).write(one)
    message = one.end()
    return zstandard.ZstdCompressor(level=1).compress(message * (size // len(message)))


def test_mcap_bombs_are_refused_before_they_inflate(tmp_path):
    bomb = zstd_zeros(BOMB_BYTES)
    assert len(bomb) < 70_000
    quarter = MCAP_MAX_CHUNK_BYTES // 2
    quarter -= quarter % 1031  # whole records
    files = {
        # the file: one chunk that says (truthfully) it holds 2.2 GB
        "declared 2.2 GB": mcap_file(tmp_path / "declared.mcap", [(bomb, BOMB_BYTES)]),
        # the same blocks behind a chunk that says it holds 1 MiB
        "lies about its size": mcap_file(tmp_path / "lying.mcap", [(bomb, 1 << 20)]),
        # chunks each under the limit, together over the file's budget
        "many chunks": mcap_file(
            tmp_path / "many.mcap",
            [(valid_records(quarter), quarter)] * (MCAP_MIN_BUDGET_BYTES // quarter + 1),
        ),
    }
    assert all(path.stat().st_size < 100_000 for path in files.values())
    legit = record_episode(tmp_path / "legit")
    cases = {
        name: f"convert_recordings([{str(path)!r}], {str(tmp_path / name)!r}, say=len)"
        for name, path in {**files, "a real recording": legit}.items()
    }
    setup = "from lang2policy.vla.dataset import convert_recordings"
    results = run_loader(setup, cases, tmp_path)
    limit = str(MCAP_MAX_CHUNK_BYTES)
    refused(
        results["declared 2.2 GB"], "Lang2PolicyError", "uncompressed_size", str(BOMB_BYTES), limit
    )
    refused(
        results["lies about its size"],
        "Lang2PolicyError",
        "decompresses to more than 1048576 bytes",
        "uncompressed_size",
    )
    refused(
        results["many chunks"], "Lang2PolicyError", "uncompressed_size", str(MCAP_MIN_BUDGET_BYTES)
    )
    assert results["a real recording"]["error"] is None


# --------------------------------------------------------------------- dataset meta/info.json
@pytest.fixture(scope="module")
def small_dataset(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("bounds") / "demos"
    with DatasetWriter(root, extra_episode_columns=("success",)) as writer:
        writer.add_episode(blank_episode())
    return root


def hostile_copy(dataset: Path, where: Path, **info_changes: object) -> Path:
    shutil.copytree(dataset, where)
    info = json.loads((where / "meta/info.json").read_text())
    (where / "meta/info.json").write_text(json.dumps({**info, **info_changes}))
    return where


def test_info_json_paths_and_widths_are_refused(small_dataset, tmp_path):
    # A frames table outside the dataset, where a "../" path would find it.
    outside = tmp_path / "outside" / "chunk-000" / "file-000.parquet"
    outside.parent.mkdir(parents=True)
    shutil.copy(small_dataset / "data/chunk-000/file-000.parquet", outside)
    escape = "../../outside/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
    absolute = str(tmp_path / "outside/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet")
    wide = "data/chunk-{chunk_index:0999999999d}/file-{file_index:03d}.parquet"
    video = "videos/{video_key}/chunk-{chunk_index:03d}/" + "{file_index:0999999999d}.mp4"
    changes = {
        "data_path leaves the dataset": {"data_path": escape},
        "data_path is absolute": {"data_path": absolute},
        "data_path width of a billion": {"data_path": wide},
        "video_path width of a billion": {"video_path": video},
        "data_path names another field": {"data_path": "{chunk_index.__class__}.parquet"},
        "image of 10^6 x 10^6": {"features": {**_features(small_dataset), **_huge_image()}},
    }
    roots = {
        name: hostile_copy(small_dataset, tmp_path / f"ds{i}", **change)
        for i, (name, change) in enumerate(changes.items())
    }
    cases = {name: f"load_dataset({str(root)!r})" for name, root in roots.items()}
    cases["the dataset itself"] = f"load_dataset({str(small_dataset)!r})"
    results = run_loader("from lang2policy.vla.dataset import load_dataset", cases, tmp_path)
    inside = "not inside the dataset's directory"
    refused(results["data_path leaves the dataset"], "Lang2PolicyError", "data_path", inside)
    refused(results["data_path is absolute"], "Lang2PolicyError", "data_path", inside)
    for name, field in (("data_path", "chunk_index"), ("video_path", "file_index")):
        refused(
            results[f"{name} width of a billion"],
            "Lang2PolicyError",
            name,
            f"width of {{{field}}} is 999999999",
            f"at most {PATH_FIELD_MAX_WIDTH}",
        )
    refused(
        results["data_path names another field"],
        "Lang2PolicyError",
        "data_path",
        "['chunk_index', 'file_index']",
    )
    refused(
        results["image of 10^6 x 10^6"], "Lang2PolicyError", "shape[0] is 1000000", "at most 4096"
    )
    assert results["the dataset itself"]["error"] is None


def _features(dataset: Path) -> dict:
    return json.loads((dataset / "meta/info.json").read_text())["features"]


def _huge_image() -> dict:
    return {
        "observation.images.front": {
            "dtype": "video",
            "shape": [1_000_000, 1_000_000, 3],
            "names": ["height", "width", "channels"],
        }
    }


# --------------------------------------------------------------------- RL policy.npz
def deflated_zeros(prefix: bytes, zeros: int) -> bytes:
    """A raw deflate stream of ``prefix`` then ``zeros`` zero bytes, built from one flushed
    1 MiB block repeated (a flush point resets the history, so the blocks are identical)."""
    mib = 1 << 20
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    head = compressor.compress(prefix) + compressor.flush(zlib.Z_FULL_FLUSH)
    block = compressor.compress(bytes(mib)) + compressor.flush(zlib.Z_FULL_FLUSH)
    assert zeros % mib == 0
    return head + block * (zeros // mib) + compressor.flush(zlib.Z_FINISH)


def zip_one(path: Path, name: str, data: bytes, file_size: int, crc: int) -> Path:
    """A zip archive of one deflated member, its directory saying ``file_size``."""
    encoded = name.encode()
    fields = struct.pack("<HHHHHIII", 20, 0, 8, 0, 0, crc, len(data), file_size)
    local = b"PK\x03\x04" + fields + struct.pack("<HH", len(encoded), 0) + encoded
    central = (
        b"PK\x01\x02"
        + struct.pack("<H", 20)
        + fields
        + struct.pack("<HHHHHII", len(encoded), 0, 0, 0, 0, 0, 0)
        + encoded
    )
    end = b"PK\x05\x06" + struct.pack(
        "<HHHHIIH", 0, 0, 1, 1, len(central), len(local) + len(data), 0
    )
    path.write_bytes(local + data + central + end)
    return path


def npy_header(shape: tuple[int, ...]) -> bytes:
    header = {"descr": "<f4", "fortran_order": False, "shape": shape}
    text = repr(header).encode() + b" "
    text += b" " * (-(len(text) + 11) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text


def test_npz_bombs_are_refused_before_they_inflate(tmp_path):
    policy = MLPPolicy(
        family="reach",
        robot="so101",
        weights=[np.zeros((8, 4)), np.zeros((2, 8))],
        biases=[np.zeros(8), np.zeros(2)],
        obs_mean=np.zeros(4),
        obs_var=np.ones(4),
        action_scale=0.5,
        control_period=0.1,
    )
    legit = policy.save(tmp_path / "legit")
    zeros = 2048 << 20  # 2 GiB
    header = npy_header((zeros // 4,))
    bomb = deflated_zeros(header, zeros)
    assert len(bomb) < 2_200_000
    directories = {}
    for name, member_size in (("zip bomb", len(header) + zeros), ("header bomb", 1 << 20)):
        directory = shutil.copytree(legit, tmp_path / name.replace(" ", "_"))
        # CRC 0: a reader checks it only after inflating everything, too late to matter
        zip_one(directory / "policy.npz", "w0.npy", bomb, member_size, crc=0)
        directories[name] = directory
    directories["the policy itself"] = legit
    cases = {name: f"load_policy({str(path)!r})" for name, path in directories.items()}
    results = run_loader("from lang2policy.rl.policy_file import load_policy", cases, tmp_path)
    refused(results["zip bomb"], "PolicyFileError", "w0.npy", "file_size", str(16 << 20))
    refused(results["header bomb"], "PolicyFileError", "w0.npy", "header declares shape")
    assert results["the policy itself"]["error"] is None


# --------------------------------------------------------------------- VLA config.json
def model_copy(where: Path, **changes: object) -> Path:
    where.mkdir()
    for name in ("model.safetensors", "normalization.json"):
        (where / name).symlink_to(MODEL / name)
    config = json.loads((MODEL / "config.json").read_text())
    (where / "config.json").write_text(json.dumps({**config, **changes}))
    return where


def test_vla_config_sizes_are_refused_with_a_clear_error(tmp_path):
    directories = {
        "head_dim of 10^9": model_copy(tmp_path / "a", head_dim=10**9),
        "2.5 x 10^8 parameters": model_copy(tmp_path / "b", head_dim=4096, head_layers=16),
        "chunk as text": model_copy(tmp_path / "c", chunk="ten"),
        "channels of 10^12": model_copy(tmp_path / "d", channels=[10**12]),
        "config.json of 1 MB": model_copy(tmp_path / "e", padding="x" * 1_000_000),
        "the shipped model": MODEL,
    }
    cases = {name: f"load_model_dir({str(path)!r})" for name, path in directories.items()}
    results = run_loader(
        "from lang2policy.vla.model.checkpoint import load_model_dir", cases, tmp_path
    )
    refused(results["head_dim of 10^9"], "ConfigError", "head_dim is 1000000000", "1..4096")
    refused(
        results["2.5 x 10^8 parameters"], "ConfigError", "parameter count", str(VLA_MAX_PARAMETERS)
    )
    refused(results["chunk as text"], "ConfigError", "chunk must be a whole number")
    refused(results["channels of 10^12"], "ConfigError", "channels[0] is 1000000000000", "1..1024")
    refused(results["config.json of 1 MB"], "ConfigError", "config.json: its size", "65536")
    assert results["the shipped model"]["error"] is None


# --------------------------------------------------------------------- remote chunks
def test_oversized_remote_chunks_are_refused(tmp_path):
    answers = {
        "43,000 rows": np.zeros((43_000, 6), np.float32),  # 1,032,000 bytes: under 1 MiB
        "the longest chunk allowed": np.zeros((REMOTE_MAX_CHUNK_ROWS, 6), np.float32),
    }
    servers = {name: FakeOpenPI(answer_actions(actions)) for name, actions in answers.items()}
    try:
        setup = (
            "import numpy as np\n"
            "from lang2policy.vla.backends import OpenPIBackend\n"
            "images = {c: np.zeros((96, 96, 3), np.uint8) for c in ('front', 'wrist')}\n"
            "state = np.zeros(6, np.float32)\n"
        )
        cases = {
            name: f"OpenPIBackend('127.0.0.1', {server.port}).act_chunk(images, state, 'lift')"
            for name, server in servers.items()
        }
        results = run_loader(setup, cases, tmp_path)
    finally:
        for server in servers.values():
            server.close()
    refused(
        results["43,000 rows"],
        "PolicyBackendError",
        "43000 rows",
        f"at most {REMOTE_MAX_CHUNK_ROWS} rows",
    )
    assert results["the longest chunk allowed"]["error"] is None


def test_the_row_limit_is_the_chunk_time_at_the_policy_rate():
    assert RemoteLimits().max_chunk_rows == REMOTE_MAX_CHUNK_ROWS == 100
    assert RemoteLimits(max_chunk_s=0.5).max_chunk_rows == 5
    validate_chunk(np.zeros((5, 6)), "test", max_rows=5)
    with pytest.raises(PolicyBackendError, match=r"6 rows \(0.6 s .*at most 5 rows"):
        validate_chunk(np.zeros((6, 6)), "test", max_rows=5)
