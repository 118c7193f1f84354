"""The core package works on a machine without ROS 2.

Everything under lang2policy/ except lang2policy/ros/ must import while rclpy and all ROS
message/interface packages are unavailable. A subprocess installs a meta-path finder that
makes those imports raise ModuleNotFoundError (as on a machine without ROS), then imports
every core module.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PKG = "lang2policy"
ROS_SUBPACKAGE = f"{PKG}.ros"

# Runs first in the subprocess (before anything from lang2policy is imported).
BLOCKER = textwrap.dedent(
    """
    import importlib.abc
    import sys

    BLOCKED_EXACT = {"rclpy", "rosgraph_msgs", "builtin_interfaces", "ament_index_python",
                     "rpyutils", "rcutils"}
    BLOCKED_PREFIXES = ("rosidl_",)
    BLOCKED_SUFFIXES = ("_msgs", "_srvs", "_interfaces")


    def is_blocked(fullname):
        top = fullname.partition(".")[0]
        return (top in BLOCKED_EXACT or top.startswith(BLOCKED_PREFIXES)
                or top.endswith(BLOCKED_SUFFIXES))


    class RosBlocker(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname, path=None, target=None):
            if is_blocked(fullname):
                raise ModuleNotFoundError(
                    f"No module named {fullname!r} (ROS blocked for this test)", name=fullname)
            return None


    sys.meta_path.insert(0, RosBlocker())
    """
)

IMPORTER = textwrap.dedent(
    """
    import importlib
    import json
    import traceback

    result = {"rclpy_blocked": False, "std_msgs_blocked": False, "failures": {}, "ros_loaded": []}
    try:
        import rclpy  # noqa: F401
    except ImportError:
        result["rclpy_blocked"] = True
    try:
        import std_msgs.msg  # noqa: F401
    except ImportError:
        result["std_msgs_blocked"] = True

    for name in MODULES:
        try:
            importlib.import_module(name)
        except BaseException:
            result["failures"][name] = traceback.format_exc()

    result["ros_loaded"] = sorted(m for m in sys.modules if is_blocked(m))
    print("RESULT:" + json.dumps(result))
    """
)


def core_modules() -> list[str]:
    """Module names under lang2policy/ except lang2policy/ros/, found by walking the tree.

    Only directories that are packages (have __init__.py, as find_packages requires) are
    entered; ``__main__`` modules are skipped (importing them runs the program).
    """
    root = REPO / PKG
    modules = []
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        dirnames[:] = sorted(
            d for d in dirnames if d != "__pycache__" and (here / d / "__init__.py").is_file()
        )
        package = ".".join(here.relative_to(REPO).parts)
        if package == ROS_SUBPACKAGE or package.startswith(ROS_SUBPACKAGE + "."):
            dirnames[:] = []
            continue
        for filename in sorted(filenames):
            if not filename.endswith(".py") or filename == "__main__.py":
                continue
            stem = filename[:-3]
            modules.append(package if stem == "__init__" else f"{package}.{stem}")
    return modules


def test_core_modules_import_without_ros():
    modules = core_modules()
    assert PKG in modules, f"{REPO / PKG / '__init__.py'} is missing"
    assert not any(m.startswith(ROS_SUBPACKAGE) for m in modules)

    script = BLOCKER + f"\nMODULES = {modules!r}\n" + IMPORTER
    env = dict(os.environ)
    # Import the source tree, whether or not the project is pip-installed.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.setdefault("MUJOCO_GL", "egl")
    proc = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT:")]
    assert proc.returncode == 0 and lines, f"subprocess failed:\n{proc.stdout}\n{proc.stderr}"
    result = json.loads(lines[-1][len("RESULT:") :])

    # The blocker works: ROS is really unavailable in the subprocess.
    assert result["rclpy_blocked"], "import rclpy succeeded; the ROS blocker is not active"
    assert result["std_msgs_blocked"], "import std_msgs.msg succeeded; blocker not active"
    assert result["ros_loaded"] == [], result["ros_loaded"]

    failures = result["failures"]
    assert not failures, "core modules failed to import without ROS:\n\n" + "\n".join(
        f"--- {name}\n{tb}" for name, tb in failures.items()
    )
