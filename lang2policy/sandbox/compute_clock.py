"""A plan's compute clock: CPU seconds, not wall seconds, so a busy machine does not cut a
correct program short.

On a 2-core robot computer that also runs the graph, a program's wall time outside motion can
be several times its compute: a correct multi-step program was cut at its 10 s limit under
load and then "repaired" wrongly. The clock counts what the plan itself costs: the sandbox
child's CPU time (user + system, from ``/proc/<pid>/stat``) and the host process's CPU time
while it plans the child's calls (IK, paths, the gate; a remote arm's backend plans in threads
of its own, so the process's time, not the calling thread's), less the CPU the motions
themselves took (the local simulator steps physics then). Other processes, however busy, do
not count. A wall-clock backstop of ``BACKSTOP`` times the
budget, motion time excluded, still ends a program that hangs without using CPU.
"""

from __future__ import annotations

import os
import time

from lang2policy.sandbox.process import ChildProcess, ChildTimeout

BACKSTOP = 6.0  # wall seconds per CPU second of budget before a plan is ended regardless
POLL_SECONDS = 0.25  # how often the child's CPU time is read while it sends nothing
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class ComputeClock:
    """The compute a plan has used against its ``budget`` (CPU seconds)."""

    def __init__(self, pid: int, budget: float) -> None:
        self.pid, self.budget = pid, budget
        self.host_seconds = 0.0
        self.backstop = time.monotonic() + BACKSTOP * budget

    def child_seconds(self) -> float:
        """The child's CPU time so far (0 where ``/proc`` cannot tell, e.g. it has exited)."""
        try:
            with open(f"/proc/{self.pid}/stat", encoding="ascii") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return 0.0
        return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime

    def used(self) -> float:
        return self.child_seconds() + self.host_seconds

    def charge_host(self, cpu_seconds: float, motion_wall: float) -> None:
        """The host spent ``cpu_seconds`` on a call (motion excluded); the call's motion
        took ``motion_wall`` wall seconds, which the backstop does not count."""
        self.host_seconds += max(0.0, cpu_seconds)
        self.backstop += motion_wall

    def receive(self, child: ChildProcess) -> dict:
        """The child's next message; ``ChildTimeout`` once the plan's compute passes its
        budget, or the backstop passes (checked before each wait too: a child that calls
        without pause never lets a wait run out)."""
        while True:
            if self.used() > self.budget or time.monotonic() >= self.backstop:
                raise ChildTimeout("the plan used up its compute time")
            try:
                return child.receive(min(time.monotonic() + POLL_SECONDS, self.backstop))
            except ChildTimeout:
                continue  # checked at the top
