"""Operating-system confinement of the sandbox child: rlimits, namespaces, seccomp.

Applied by the child to itself after it has loaded everything it will ever need (numpy, the
guards) and before it compiles the plan. Each layer reports whether it is active, so the host
can show which protections a run had. Uses only the standard library.
"""

from __future__ import annotations

import ctypes
import errno
import os
import resource
import signal

import seccomp  # sibling module: the child puts this directory on sys.path

_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_CLONE_NEWIPC = 0x08000000
_PR_SET_PDEATHSIG = 1


def set_rlimits(cpu_seconds: float, memory_mb: int) -> str:
    """CPU time, address space, no file growth, no core dumps, few descriptors, no children."""
    cpu = max(1, int(cpu_seconds + 0.999))
    limits = {
        resource.RLIMIT_CPU: (cpu, cpu + 1),  # SIGXCPU at the soft limit, SIGKILL at the hard
        resource.RLIMIT_AS: (memory_mb << 20, memory_mb << 20),
        resource.RLIMIT_FSIZE: (0, 0),
        resource.RLIMIT_CORE: (0, 0),
        resource.RLIMIT_NOFILE: (16, 16),
        resource.RLIMIT_NPROC: (0, 0),
    }
    failed = []
    for which, value in limits.items():
        try:
            resource.setrlimit(which, value)
        except (ValueError, OSError) as exc:
            failed.append(f"{which}: {exc}")
    return "; ".join(failed)


def enter_namespaces() -> str:
    """A fresh user, network and IPC namespace: no interfaces (not even loopback is up), no
    SysV IPC shared with the host. Returns "" on success, else why not."""
    libc = ctypes.CDLL(None, use_errno=True)
    for flags in (
        _CLONE_NEWUSER | _CLONE_NEWNET | _CLONE_NEWIPC,
        _CLONE_NEWNET | _CLONE_NEWIPC,  # root without user namespaces (some container setups)
    ):
        if libc.unshare(flags) == 0:
            return ""
        reason = errno.errorcode.get(ctypes.get_errno(), "?")
    return f"unshare failed ({reason})"


def die_with_parent() -> None:
    """SIGKILL this process when the host goes away, so no orphan outlives a crashed host."""
    parent = os.getppid()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the host died before the request took effect
        os._exit(7)


def confine(cpu_seconds: float, memory_mb: int) -> dict[str, str]:
    """Apply every OS layer; returns {layer: "on" | "off: <why>"}."""
    die_with_parent()
    layers = {}
    namespaces = enter_namespaces()
    layers["namespaces"] = "off: " + namespaces if namespaces else "on"
    rlimits = set_rlimits(cpu_seconds, memory_mb)
    layers["rlimits"] = "partial: " + rlimits if rlimits else "on"
    os.umask(0o777)
    filtered = seccomp.install()
    layers["seccomp"] = "off: " + filtered if filtered else "on"
    return layers
