"""Recording file names: start time + a slug of the instruction, never overwriting a file."""

from __future__ import annotations

import re
import unicodedata
from datetime import datetime
from pathlib import Path

SUFFIX = ".mcap"
PARTIAL_SUFFIX = ".mcap.part"  # while a file is being written; renamed when it is complete
_MAX_SLUG = 48


def slug(text: str, max_length: int = _MAX_SLUG) -> str:
    """Lower-case words joined by ``-`` (``"Put the RED block!"`` -> ``put-the-red-block``);
    ``episode`` when nothing is left."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    words = re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")
    cut = words[:max_length].rstrip("-")
    half_word = len(cut) == max_length and len(words) > max_length and words[max_length] != "-"
    if half_word and "-" in cut:
        cut = cut.rsplit("-", 1)[0]
    return cut or "episode"


def recording_path(directory: Path, started: datetime, label: str) -> Path:
    """``<directory>/<YYYYmmdd-HHMMSS>_<slug>.mcap``; ``-2``, ``-3``... if taken."""
    stem = f"{started:%Y%m%d-%H%M%S}_{slug(label)}"
    candidate, number = stem, 1
    while any((directory / f"{candidate}{s}").exists() for s in (SUFFIX, PARTIAL_SUFFIX)):
        number += 1
        candidate = f"{stem}-{number}"
    return directory / f"{candidate}{SUFFIX}"
