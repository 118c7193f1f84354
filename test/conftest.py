"""Shared test setup: headless rendering must be chosen before anything imports mujoco."""

import os

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


def pytest_collection_modifyitems(config, items):


    for item in items:
        if item.get_closest_marker("ros") and not item.get_closest_marker("flaky"):
            item.add_marker(pytest.mark.flaky(reruns=ROS_RERUNS))


@pytest.fixture(scope="module")
def vocab():
    llama_cpp = pytest.importorskip("llama_cpp")
    try:
        from lang2policy.llm.local_server import local_model_path

        path = local_model_path()
    except Exception as exc:  # no packaged model: nothing to run the grammar on
        pytest.skip(f"no local model for its vocabulary: {exc}")
    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    model = llama_cpp.llama_model_load_from_file(str(path).encode(), params)
    assert model, "the local model's vocabulary did not load"
    yield llama_cpp.llama_model_get_vocab(model)
    llama_cpp.llama_model_free(model)
