"""lang2policy: tell a robot arm what to do in plain language, and correct it while it moves.

The core (everything outside ``lang2policy.ros``) imports no ROS and runs on a plain Python
install; ``lang2policy.ros`` is the thin rclpy shell around it.
"""

import os as _os

# MuJoCo picks its OpenGL backend when it is first imported; default to headless EGL (works
# without a display or GPU) unless the user chose a backend. Set here, before any mujoco import.
_os.environ.setdefault("MUJOCO_GL", "egl")
_os.environ.setdefault("PYOPENGL_PLATFORM", _os.environ["MUJOCO_GL"])

__version__ = "0.1.0"
