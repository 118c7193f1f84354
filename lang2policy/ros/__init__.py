"""ROS 2 shell around the core: rclpy nodes and message conversion.

This is the only package of lang2policy that imports rclpy or ROS message packages; everything
else runs and is tested without ROS. Nodes here stay short: read parameters, build core objects,
convert messages (``convert``), call the core, publish.
"""
