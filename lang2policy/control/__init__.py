"""Low-level control: inverse kinematics, joint trajectories and motion primitives."""
