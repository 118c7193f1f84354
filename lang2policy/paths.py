"""Where the data directories (config/, sim/, models/, hardware/) live.

In a source checkout they sit beside the package; in a ROS 2 install (colcon / ``setup.py
install``) they are under ``<prefix>/share/lang2policy``. ``LANG2POLICY_SHARE`` overrides both.
"""

from __future__ import annotations

import os
import sys
from functools import cache
from pathlib import Path

from lang2policy.errors import ConfigError

_MARKER = "sim"


def _candidates() -> list[Path]:
    found = []
    if env := os.environ.get("LANG2POLICY_SHARE"):
        found.append(Path(env))
    found.append(Path(__file__).resolve().parent.parent)
    for prefix in {sys.prefix, *os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep)}:
        if prefix:
            found.append(Path(prefix) / "share" / "lang2policy")
    return found


@cache
def share_dir() -> Path:
    """The directory holding config/, sim/, models/ and hardware/."""
    for candidate in _candidates():
        if (candidate / _MARKER).is_dir() and (candidate / "config").is_dir():
            return candidate
    tried = ", ".join(str(c) for c in _candidates())
    raise ConfigError(f"lang2policy data directories not found; looked in: {tried}")


def config_dir() -> Path:
    return share_dir() / "config"


def sim_dir() -> Path:
    return share_dir() / "sim"


def hardware_dir() -> Path:
    return share_dir() / "hardware"
