"""lang2policy: tell a robot arm what to do in plain language, and correct it while it moves.

The core (everything outside ``lang2policy.ros``) imports no ROS and runs on a plain Python
install; ``lang2policy.ros`` is the thin rclpy shell around it.
"""

__version__ = "0.1.0"
