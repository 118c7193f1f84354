"""Packaging for lang2policy (ROS 2 ament_python package, also pip-installable).

Build it either way:
  * ``colcon build`` in a workspace (ROS 2 convention; executables land in
    ``<install>/lib/lang2policy/`` so ``ros2 run lang2policy <name>`` works), or
  * ``pip install -e . --no-deps`` into a virtual environment (see scripts/setup.sh;
    console scripts land in the venv's ``bin/``).
"""

import os

from setuptools import find_packages, setup

PACKAGE_NAME = "lang2policy"

# ---------------------------------------------------------------------------
# Executables: the ONE place to add a new command / ROS node.
# "<executable name>": "<module>:<function>"
# ---------------------------------------------------------------------------
CONSOLE_SCRIPTS = {
    "lang2policy": "lang2policy.cli:main",
    "sim_node": "lang2policy.ros.sim_node:main",
    "planner_node": "lang2policy.ros.planner_node:main",
    "controller_node": "lang2policy.ros.controller_node:main",
    "safety_node": "lang2policy.ros.safety_node:main",
    "perception_node": "lang2policy.ros.perception_node:main",
    "terminal_node": "lang2policy.ros.terminal_node:main",
    "recorder_node": "lang2policy.ros.recorder_node:main",
    "so101_driver_node": "lang2policy.ros.so101_driver_node:main",
    "usb_camera_node": "lang2policy.ros.usb_camera_node:main",
    "so101_emulator_node": "lang2policy.ros.so101_emulator_node:main",
    "joint_map_bridge_node": "lang2policy.ros.joint_map_bridge_node:main",
    "jtc_standin_node": "lang2policy.ros.jtc_standin_node:main",
    "vla_node": "lang2policy.ros.vla_node:main",
    "teleop_node": "lang2policy.ros.teleop_node:main",
}

# Top-level directories whose files are installed verbatim to
# share/lang2policy/<same relative path> (found at run time by lang2policy/paths.py).
DATA_DIRS = ("launch", "config", "sim", "models", "hardware")

_SKIP_DIRS = {"__pycache__", ".pytest_cache", ".ruff_cache", ".ipynb_checkpoints"}
_SKIP_SUFFIXES = (".pyc", ".pyo")

HERE = os.path.dirname(os.path.abspath(__file__))


def _walk_files(top):
    """Yield (relative dir, [relative file paths]) under ``top`` (relative to HERE), sorted."""
    root = os.path.join(HERE, top)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
        rel_dir = os.path.relpath(dirpath, HERE)
        files = [
            os.path.join(rel_dir, f) for f in sorted(filenames) if not f.endswith(_SKIP_SUFFIXES)
        ]
        yield rel_dir, files


def data_files():
    """ament index marker, package.xml and every file under DATA_DIRS."""
    entries = [
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE_NAME}"]),
        (f"share/{PACKAGE_NAME}", ["package.xml"]),
    ]
    for top in DATA_DIRS:
        for rel_dir, files in _walk_files(top):
            if files:
                entries.append((f"share/{PACKAGE_NAME}/{rel_dir}", files))
    return entries


def package_data():
    """Non-Python files inside the Python package (e.g. prompt templates), if any."""
    pkg_root = os.path.join(HERE, PACKAGE_NAME)
    found = []
    for _rel_dir, files in _walk_files(PACKAGE_NAME):
        for path in files:
            if not path.endswith(".py"):
                found.append(os.path.relpath(os.path.join(HERE, path), pkg_root))
    return {PACKAGE_NAME: found} if found else {}


setup(
    name=PACKAGE_NAME,
    version="0.1.0",
    description="Command a robot arm in natural language (LLM planner + MuJoCo + ROS 2).",
    license="Apache-2.0",
    python_requires=">=3.11",
    # Only the lang2policy package tree; never test/ (nor data dirs that happen to hold
    # an __init__.py).
    packages=find_packages(include=[PACKAGE_NAME, f"{PACKAGE_NAME}.*"], exclude=["test", "test.*"]),
    package_data=package_data(),
    data_files=data_files(),
    # Runtime dependencies are pinned in requirements*.txt (pip) and package.xml (rosdep).
    install_requires=[],
    # Optional, pinned: `pip install -e .[scale]` adds `accelerate launch` for `train vla`
    # (docs/vla.md, training at scale; torchrun comes with torch); `.[ray]` adds `--executor ray`
    # (record demos, bench vla, bench executor). requirements-dev.txt installs both, so the
    # tests run the real launchers and real Ray.
    extras_require={"scale": ["accelerate==1.15.0"], "ray": ["ray==2.60.0"]},
    zip_safe=False,
    entry_points={
        "console_scripts": [f"{name} = {target}" for name, target in CONSOLE_SCRIPTS.items()],
    },
)
