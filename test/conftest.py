"""Shared test setup: headless rendering must be chosen before anything imports mujoco."""

import os

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
