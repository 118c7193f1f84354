"""The robot API that policy code sees: skill definitions and the host-side backend."""
