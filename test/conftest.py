"""Shared test setup: headless rendering must be chosen before anything imports mujoco; markers
given by folder; the fixtures that tests in more than one folder use.

The tree mirrors the package (docs/testing.md): ``test/<package>/test_<module>.py``. A fixture
is defined once, in the nearest ``conftest.py`` that covers every test using it
(test/project/test_test_tree.py checks), and shared helpers live in ``test/support/``."""

import os
from pathlib import Path

import pytest

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])

# The local LLM server keeps processed prompt prefixes on disk across restarts
# (llama_disk_prefixes). Tests share one directory per run, not the user's ~/.cache: the
# servers of one run (graph tests start their own) still reuse each other's prefixes.
if "LANG2POLICY_LLM_PREFIX_ROOT" not in os.environ:
    import atexit
    import shutil
    import tempfile

    _prefix_root = tempfile.mkdtemp(prefix="lang2policy-test-prefixes-")
    os.environ["LANG2POLICY_LLM_PREFIX_ROOT"] = _prefix_root
    atexit.register(shutil.rmtree, _prefix_root, ignore_errors=True)


# The graph tests (marker ``ros``) run real nodes in real time beside each other on the CI's two
# cores; their bounds are in sim time where they can be, but a probe's view, a DDS trip or a
# node's callback can still lag past one under load (fresh-clone CI runs failed 2-4 different
# ones of them, each passing on its own). Each is re-run up to ROS_RERUNS times
# (pytest-rerunfailures); a re-run shows as R in the progress line and in the summary.
ROS_RERUNS = 2


# Every test under test/ros/ runs ROS 2 nodes: marked ``ros`` by folder (tests elsewhere that start
# nodes carry the marker themselves).
ROS_FOLDERS = ("ros",)
# Files marked ``slow`` here: the longest outside the ROS tests, measured with
# ``pytest -m "not slow" --durations=150`` (seconds, all of a file's tests together). Without
# them and the ROS tests, ``scripts/test.sh -m "not slow"`` is the fast loop (docs/testing.md).
SLOW_FILES = {
    "session/test_bus_camera.py": 146, "vla/test_checkpoint.py": 62,
    "session/test_camera.py": 50, "sandbox/test_gate_property.py": 42,
    "sandbox/test_redteam.py": 37, "vla/test_dataset.py": 35, "test_cli.py": 35,
    "rl/test_train.py": 27, "bench/test_cap.py": 24, "vla/test_lerobot_backend.py": 16,
    "bench/test_vla_bus.py": 13, "vla/test_demos.py": 11, "bench/test_perception.py": 11,
    "vla/test_train.py": 10, "vla/test_merge.py": 10, "rl/test_distill.py": 9,
    "conductor/test_reward_outcome.py": 9, "mpc/test_process.py": 7, "session/test_remote.py": 7,
    "sandbox/test_gate_corrections.py": 7,
}  # fmt: skip


def pytest_collection_modifyitems(config, items):
    root = Path(__file__).parent
    for item in items:
        path = Path(str(item.path))
        where = path.relative_to(root) if path.is_relative_to(root) else None
        if where is not None and where.parts[0] in ROS_FOLDERS:
            item.add_marker(pytest.mark.ros)
        if where is not None and where.as_posix() in SLOW_FILES:
            item.add_marker(pytest.mark.slow)
        if item.get_closest_marker("ros"):
            item.add_marker(pytest.mark.slow)  # nodes in processes: seconds each
            if not item.get_closest_marker("flaky"):
                item.add_marker(pytest.mark.flaky(reruns=ROS_RERUNS))


# ---------------------------------------------------------------- fixtures of several folders
@pytest.fixture(scope="module")
def world():
    """The SO-101 tabletop scene, freshly loaded (one per test module)."""
    from lang2policy.scene.world import World

    return World("so101")


@pytest.fixture(scope="module")
def session():
    """An in-process simulated SO-101 session (one per test module)."""
    from lang2policy.session.sim import SimSession

    return SimSession("so101")


@pytest.fixture()
def arm():
    """A simulated arm stepped by a thread behind a message boundary (the robot node's part)."""
    from lang2policy.bench.live_arm import LiveArm

    live = LiveArm()
    yield live
    live.close()


@pytest.fixture(scope="module")
def tool():
    """The SO-101's tool kinematics in the VLA's joint order."""
    from lang2policy.vla.skill.limits import tool_kinematics
    from lang2policy.vla.spec.schema import JOINT_NAMES

    return tool_kinematics("so101", JOINT_NAMES)
