"""The per-plan resource limits of a sandbox child, and the OS layers a run refuses to go
without (the privilege policy holds the skill budgets)."""

from __future__ import annotations

import platform
import sys
from dataclasses import dataclass, field


def default_required_layers() -> tuple[str, ...]:
    """OS layers a run refuses to go without: seccomp where we have a tested table."""
    if sys.platform == "linux" and platform.machine() in ("x86_64", "AMD64"):
        return ("rlimits", "seccomp")
    return ("rlimits",)


@dataclass(frozen=True)
class SandboxLimits:
    """Per-plan resource limits of the child (the privilege policy holds the skill budgets)."""

    # Seconds the plan may spend outside motion: the child's compute and the host's planning
    # of every call (IK, paths, decisions), refused or not. Time the arm moves is counted by
    # the policy's motion budget instead.
    wall_seconds: float = 10.0
    cpu_seconds: float = 10.0
    memory_mb: int = 1024
    max_output_bytes: int = 16 * 1024  # printed text kept; 8x this in total ends the plan
    max_message_bytes: int = 1 << 20
    startup_seconds: float = 20.0
    required_layers: tuple[str, ...] = field(default_factory=default_required_layers)
