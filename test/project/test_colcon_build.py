"""The package builds as a ROS 2 ament_python package with colcon and installs everything.

Builds a copy of the repository's package files in a temporary colcon workspace with the
colcon from PyPI (colcon-core + colcon-ros, which provides the ament_python build type) and
the venv's Python, then checks the install space: ament index marker, package.xml, every file
of the data directories, the executables in lib/lang2policy/ (where `ros2 run` looks) and the
Python package itself.

No extra environment variables are needed: colcon runs `setup.py` with the interpreter it
runs under (the venv's python), and the ROS wheels' .pth hook sets LD_LIBRARY_PATH itself.
We only point COLCON_HOME at the temporary directory so a user's ~/.colcon defaults (mixins,
default arguments) cannot change the build, and drop the prefix-path variables of any
sourced ROS installation so the build sees only this workspace.
"""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PKG = "lang2policy"

# What a ROS user would put into <ws>/src/lang2policy (everything colcon/setup.py reads).
PACKAGE_ITEMS = (
    "package.xml",
    "setup.py",
    "setup.cfg",
    "resource",
    PKG,
    "launch",
    "config",
    "sim",
    "models",
    "hardware",
    "README.md",
)
# Installed verbatim to share/lang2policy/<relative path> (see DATA_DIRS in setup.py).
DATA_DIRS = ("launch", "config", "sim", "models", "hardware")
# Executables that must always exist; every other console script is checked as well.
REQUIRED_EXECUTABLES = ("lang2policy", "sim_node")

_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo", ".pytest_cache")

pytestmark = pytest.mark.slow


def _colcon_cmd() -> list[str]:
    exe = Path(sys.executable).parent / "colcon"
    if exe.is_file():
        return [str(exe)]
    # colcon-core has no __main__ module; call its entry point through this interpreter.
    entry = "import sys; from colcon_core.command import main; sys.exit(main())"
    return [sys.executable, "-c", entry]


def _repo_files(top: str) -> list[Path]:
    """Files under REPO/top, relative to REPO, skipping caches (as setup.py does)."""
    root = REPO / top
    if not root.is_dir():
        return []
    return sorted(
        p.relative_to(REPO)
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and not p.name.endswith((".pyc", ".pyo"))
    )


def _build(tmp_path: Path, *extra_args: str) -> Path:
    """Copy the package into <tmp>/ws/src/lang2policy, colcon build it, return the prefix."""
    ws = tmp_path / "ws"
    src = ws / "src" / PKG
    src.mkdir(parents=True)
    for item in PACKAGE_ITEMS:
        path = REPO / item
        if path.is_dir():
            shutil.copytree(path, src / item, ignore=_IGNORE)
        elif path.is_file():
            shutil.copy2(path, src / item)

    env = dict(os.environ)
    env["COLCON_HOME"] = str(tmp_path / "colcon_home")
    for var in ("COLCON_PREFIX_PATH", "AMENT_PREFIX_PATH", "CMAKE_PREFIX_PATH"):
        env.pop(var, None)

    cmd = [
        *_colcon_cmd(),
        "build",
        "--base-paths",
        "src",
        "--event-handlers",
        "console_direct+",
        *extra_args,
    ]
    proc = subprocess.run(
        cmd, cwd=ws, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"colcon build failed ({proc.returncode}):\n{output[-8000:]}"
    # colcon-ros warns and falls back to implicit installation when setup.py's data_files
    # do not install the ament index marker / package.xml itself; ours must.
    assert "doesn't explicitly install" not in output, output[-8000:]
    prefix = ws / "install" / PKG  # default isolated layout: install/<package>/
    assert prefix.is_dir(), output[-8000:]
    return prefix


def _check_install_space(prefix: Path) -> None:
    share = prefix / "share" / PKG
    assert (prefix / "share/ament_index/resource_index/packages" / PKG).is_file()
    assert (share / "package.xml").read_bytes() == (REPO / "package.xml").read_bytes()

    # Every data file of the repo is installed with identical content. sim/ and config/
    # must not be empty (the simulation cannot run without them).
    for top in ("sim", "config"):
        assert _repo_files(top), f"repository has no files under {top}/"
    checked = 0
    for top in DATA_DIRS:
        for rel in _repo_files(top):
            installed = share / rel
            assert installed.is_file(), f"{rel} not installed to {installed}"
            assert installed.read_bytes() == (REPO / rel).read_bytes(), f"{rel} differs"
            checked += 1
    assert checked > 0

    # Executables for `ros2 run lang2policy <name>` (all console scripts are checked in
    # test_colcon_build_installs_package).
    lib = prefix / "lib" / PKG
    for name in REQUIRED_EXECUTABLES:
        exe = lib / name
        assert exe.is_file(), f"missing executable {exe}"
        assert os.access(exe, os.X_OK), f"{exe} is not executable"


def _site_packages(prefix: Path) -> Path:
    found = list(prefix.glob("lib/python3*/site-packages"))
    assert len(found) == 1, found
    return found[0]


def _console_scripts(site_packages: Path) -> dict[str, str]:
    (egg_info,) = site_packages.glob(f"{PKG}-*.egg-info")
    parser = configparser.ConfigParser()
    parser.optionxform = str  # keep executable names as written
    parser.read(egg_info / "entry_points.txt")
    return dict(parser["console_scripts"]) if parser.has_section("console_scripts") else {}


def test_colcon_build_installs_package(tmp_path):
    prefix = _build(tmp_path)
    _check_install_space(prefix)
    site_packages = _site_packages(prefix)

    # Every module of the source package is installed (a directory without __init__.py would
    # be silently left out by find_packages).
    for src_file in _repo_files(PKG):
        if src_file.suffix == ".py":
            assert (site_packages / src_file).is_file(), f"{src_file} not installed"

    scripts = _console_scripts(site_packages)
    assert set(REQUIRED_EXECUTABLES) <= set(scripts), scripts
    for name in scripts:
        exe = prefix / "lib" / PKG / name
        assert exe.is_file() and os.access(exe, os.X_OK), f"missing executable {exe}"

    # The installed package (not the source checkout or the venv's editable install) is
    # what gets imported with the install space on PYTHONPATH, and every console-script
    # target whose module exists already resolves to a callable.
    targets = {
        name: target
        for name, target in scripts.items()
        if (REPO / (target.split(":")[0].replace(".", "/") + ".py")).is_file()
        or (REPO / target.split(":")[0].replace(".", "/") / "__init__.py").is_file()
    }
    probe = (
        "import importlib, sys\n"
        f"import {PKG}\n"
        f"assert {PKG}.__file__.startswith(sys.argv[1]), {PKG}.__file__\n"
        "for target in sys.argv[2:]:\n"
        "    module, _, attr = target.partition(':')\n"
        "    obj = importlib.import_module(module)\n"
        "    for part in attr.split('.'):\n"
        "        obj = getattr(obj, part)\n"
        "    assert callable(obj), target\n"
        "    assert importlib.import_module(module).__file__.startswith(sys.argv[1])\n"
    )
    env = dict(os.environ, PYTHONPATH=str(site_packages))
    env.setdefault("MUJOCO_GL", "egl")
    proc = subprocess.run(
        [sys.executable, "-c", probe, str(site_packages), *targets.values()],
        cwd=tmp_path,  # not the repo root: the source tree must not shadow the install
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_colcon_symlink_install(tmp_path):
    """`colcon build --symlink-install` (the usual ROS developer workflow) works too."""
    prefix = _build(tmp_path, "--symlink-install")
    _check_install_space(prefix)
