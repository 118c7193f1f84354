"""The limits every VLA-side loader checks a file's declared sizes against, before it takes
memory for them: MCAP recordings, a dataset's ``meta/`` files, a model's ``config.json`` and
a remote policy server's answer. The RL policy file has its own (``rl/policy_file.py``).

A file or a server can say anything: a chunk "holds 2.2 GB", a path is "../../x", a width is a
billion characters, a network is a trillion parameters, a chunk is 43,000 rows. Each loader
compares such a number with the limit here first and refuses the file with one line that
names the field, what it said and what is allowed (``at_most``). The limits are far above what
this project writes or ships (noted beside each), so a legitimate file never meets one.
"""

from __future__ import annotations

from lang2policy.errors import Lang2PolicyError
from lang2policy.vla.spec.schema import FPS

MIB = 1 << 20

# ---------------------------------------------------------------- MCAP recordings
# One chunk, uncompressed (the recorder writes 1 MiB chunks; one 4K rgb8 image is 25 MiB).
MCAP_MAX_CHUNK_BYTES = 64 * MIB
# One record read from the file: a chunk (its compressed records) or a message.
MCAP_MAX_RECORD_BYTES = MCAP_MAX_CHUNK_BYTES + MIB
# One schema, channel or metadata record (ours are a few KiB).
MCAP_MAX_SMALL_RECORD_BYTES = MIB
# All chunks together, uncompressed: this many times the file's size, and this much at least
# (a zstd bomb of zeros inflates 30,000 times).
MCAP_MAX_EXPANSION = 100
MCAP_MIN_BUDGET_BYTES = 128 * MIB
# Records in one file, in chunks or not; each costs a decode (a minute at 50 Hz joint states
# and two 30 Hz cameras is about 7,000; this many decode in about 3 s).
MCAP_MAX_RECORDS = 300_000

# ---------------------------------------------------------------- dataset meta/
META_JSON_MAX_BYTES = 4 * MIB  # info.json, stats.json (LeRobot's are a few KiB)
PATH_TEMPLATE_MAX_CHARS = 256  # data_path, video_path
PATH_FIELD_MAX_WIDTH = 20  # the widest padding of a path field (LeRobot writes :03d)
# The fields each path template of info.json may name: exactly what the reader fills in.
PATH_TEMPLATE_FIELDS = {
    "data_path": ("chunk_index", "file_index"),
    "video_path": ("video_key", "chunk_index", "file_index"),
}
IMAGE_MAX_SIDE = 4096  # a video feature's height and width, pixels
VECTOR_MAX_DIM = 4096  # a vector feature's length (state, action, scene state ...)
DATASET_MAX_FPS = 1000

# ---------------------------------------------------------------- VLA model directory
VLA_CONFIG_MAX_BYTES = 64 * 1024  # config.json (ours is under 1 KiB)
VLA_NORMALIZATION_MAX_BYTES = 4 * MIB  # normalization.json
VLA_MAX_PARAMETERS = 50_000_000  # the shipped network has 1.7 M
VLA_WEIGHTS_MAX_BYTES = 4 * VLA_MAX_PARAMETERS + MIB  # float32 weights and the header
# Each integer size of config.json: (least, most).
VLA_SIZE_LIMITS: dict[str, tuple[int, int]] = {
    "image_size": (1, 1024),
    "state_dim": (1, 64),
    "action_dim": (1, 64),
    "chunk": (1, 100),
    "groups": (1, 1024),
    "language_dim": (1, 8192),
    "film_dim": (1, 4096),
    "head_dim": (1, 4096),
    "head_layers": (1, 16),
    "aux_dim": (0, 1024),
    "fps": (1, 1000),
}
VLA_MAX_CHANNEL = 1024  # channels of one conv stage
VLA_MAX_STAGES = 8  # conv stages
VLA_MAX_CAMERAS = 8
VLA_MAX_NAME_CHARS = 128  # a camera's or the language model's name

# ---------------------------------------------------------------- remote policy servers
# Rows of one answered chunk: 10 s of actions at the policy rate, a row being one action of
# 1 / FPS s (openpi's pi0 answers 50 rows, OpenVLA-OFT 8 or 25, our own model 10).
REMOTE_MAX_CHUNK_S = 10.0
REMOTE_MAX_CHUNK_ROWS = round(REMOTE_MAX_CHUNK_S * FPS)


def at_most(
    value: int,
    limit: int,
    field: str,
    where: str,
    error: type[Lang2PolicyError] = Lang2PolicyError,
    unit: str = "",
) -> int:
    """``value`` if it is at most ``limit``; otherwise ``error`` naming ``where``, ``field``,
    the value and the limit (``unit``: "bytes" adds MiB)."""
    if value > limit:
        raise error(
            f"{where}: {field} is {_amount(value, unit)}; at most {_amount(limit, unit)} is allowed"
        )
    return value


def _amount(value: int, unit: str) -> str:
    if unit == "bytes" and value >= MIB:
        return f"{value} bytes ({value / MIB:.1f} MiB)"
    return f"{value} {unit}".rstrip()
