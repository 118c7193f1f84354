"""Effect probes for the sandbox red-team suite (test/sandbox/test_redteam.py).

An attack on the sandbox is judged by what it did to the host and the simulator, never by the
error message it got back. This module holds the probes that observe those effects:

* ``HostFile``: a host file's content, mode, timestamps, extended attributes and inode flags;
* ``NetTraps``: a TCP listener and a UDP socket on 127.0.0.1 that record anything arriving;
* ``SignalTrap``: counting handlers for catchable signals a child could aim at the host;
* ``child_pids`` / ``sched_state``: processes left behind, the host's scheduling state;
* ``EeRecorder``: a sim-robot observer recording the end-effector site and the tool centre
  point after every simulation step;
* ``run_guarded``: runs a plan in a thread so a hung host is detected instead of hanging pytest;
* ``run_in_fresh_host``: runs a plan in a separate, sacrificial host process (for attacks that
  would kill or slow the host: the test process must survive them even when they succeed).

Attack programs are templates; ``render`` fills ``@NAME@`` placeholders with Python literals.
Run as a script (``python test/support/redteam.py host PAYLOAD OUT``) it is the sacrificial host.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

SECRET_ENV = "L2P_REDTEAM_SECRET"
SEED = 11
OBJECTS = ["red block", "blue block", "green bowl"]
CHILD_MARKER = "sandbox/child.py"

# Prepended to attacks that first switch the child's Python guards off, so the OS layers are
# what is tested. It walks object.__subclasses__() to the guards' state class and clears the
# audit hook's switch (a plain class attribute), then takes os, sys, the real builtins and a
# libc handle from modules the child already loaded. ``attempt`` runs one try and prints
# "REACHED <label> -> <result>", so a test can tell the payload got as far as the OS boundary.
ESCAPE = """
_subs = ().__class__.__base__.__subclasses__()
def _find(name):
    for c in _subs:
        if c.__name__ == name:
            return c
    raise LookupError(name)
_find("_State").policy_running = False
_osg = _find("_wrap_close").__init__.__globals__
sys = _osg["sys"]
os = sys.modules["os"]
RB = _osg["__builtins__"]
RB = RB if isinstance(RB, dict) else RB.__dict__
_BE = RB["BaseException"]
ctypes = sys.modules["ctypes"]
libc = ctypes.CDLL(None, use_errno=True)
def attempt(label, fn, *args, **kwargs):
    try:
        result = fn(*args, **kwargs)
    except _BE as exc:
        result = exc.__class__.__name__ + ": " + str(exc)[:200]
    print("REACHED", label, "->", str(result)[:300])
    return result
"""


def render(template: str, **values: object) -> str:
    """Replace each ``@NAME@`` in ``template`` by ``repr(value)``."""
    for name, value in values.items():
        template = template.replace(f"@{name}@", repr(value))
    missing = [n for n in _PLACEHOLDERS if f"@{n}@" in template]
    if missing:
        raise ValueError(f"an attack template has unfilled placeholders: {missing}")
    return template


_PLACEHOLDERS = (
    "CANARY",
    "HOST_FILE",
    "SECRET_FILE",
    "TCP_PORT",
    "UDP_PORT",
    "SECRET_ENV",
    "MARK",
    "SECRET",
)


# ---------------------------------------------------------------------- host files
_FS_IOC_GETFLAGS = 0x80086601


def inode_flags(path: Path) -> int:
    """The file's inode flags (chattr/lsattr), or -1 where the file system has none."""
    import fcntl

    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return -1
    try:
        buf = bytearray(8)
        fcntl.ioctl(fd, _FS_IOC_GETFLAGS, buf)
        return int.from_bytes(buf[:4], sys.byteorder)
    except OSError:
        return -1
    finally:
        os.close(fd)


@dataclass(frozen=True)
class HostFile:
    """Everything an attack could change about one host file."""

    exists: bool
    content: bytes = b""
    mode: int = 0
    uid: int = -1
    mtime_ns: int = 0
    xattrs: tuple = ()
    flags: int = -1

    @classmethod
    def snapshot(cls, path: Path) -> HostFile:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return cls(False)
        try:
            xattrs = tuple(sorted((n, os.getxattr(path, n)) for n in os.listxattr(path)))
        except OSError:
            xattrs = ()
        return cls(
            True,
            path.read_bytes(),
            st.st_mode,
            st.st_uid,
            st.st_mtime_ns,
            xattrs,
            inode_flags(path),
        )


# ---------------------------------------------------------------------- network
class NetTraps:
    """A TCP listener and a UDP socket on 127.0.0.1; ``hits()`` says what reached them."""

    def __init__(self) -> None:
        self.tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.tcp.bind(("127.0.0.1", 0))
        self.tcp.listen(16)
        self.tcp.setblocking(False)
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.udp.setblocking(False)
        self.tcp_port = self.tcp.getsockname()[1]
        self.udp_port = self.udp.getsockname()[1]

    def hits(self) -> list[str]:
        found = []
        while True:
            try:
                conn, peer = self.tcp.accept()
            except BlockingIOError:
                break
            found.append(f"tcp connection from {peer}")
            conn.close()
        while True:
            try:
                data, peer = self.udp.recvfrom(65536)
            except BlockingIOError:
                break
            found.append(f"udp datagram {data[:40]!r} from {peer}")
        return found

    def close(self) -> None:
        self.tcp.close()
        self.udp.close()


# ---------------------------------------------------------------------- processes
def _stat_fields(pid: str) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split()  # fields from "state" on


def child_pids(parent: int | None = None) -> dict[int, str]:
    """Direct children of ``parent`` (default: this process): pid -> state letter."""
    parent = os.getpid() if parent is None else parent
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = _stat_fields(entry)
        if fields and int(fields[1]) == parent:
            found[int(entry)] = fields[0]
    return found


def cmdline(pid: int) -> str:
    try:
        return (
            Path(f"/proc/{pid}/cmdline")
            .read_bytes()
            .replace(b"\0", b" ")
            .decode("utf-8", "replace")
        )
    except OSError:
        return ""


def kill_sandbox_children(parent: int | None = None) -> list[int]:
    """SIGKILL sandbox children (started by this process's runner) that are still running."""
    killed = []
    for pid in child_pids(parent):
        if CHILD_MARKER in cmdline(pid):
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except ProcessLookupError:
                pass
    return killed


def reap_zombies(known: set[int]) -> None:
    """Reap exited children that are not ``known`` (orphans re-parented to us as subreaper)."""
    for pid, state in child_pids().items():
        if state == "Z" and pid not in known:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)


def set_child_subreaper(on: bool) -> bool:
    """Make orphaned descendants (e.g. a forked grandchild) re-parent to this process."""
    if sys.platform != "linux":
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(36, 1 if on else 0, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER


def sched_state(pid: int = 0) -> dict:
    """CPU affinity, scheduling policy and nice value of ``pid`` (0: this process)."""
    return {
        "affinity": sorted(os.sched_getaffinity(pid)),
        "policy": os.sched_getscheduler(pid),
        "nice": os.getpriority(os.PRIO_PROCESS, pid),
    }


class SignalTrap:
    """Counting handlers for catchable signals a sandbox child might send the host."""

    SIGNALS = (
        signal.SIGUSR1,
        signal.SIGUSR2,
        signal.SIGIO,
        signal.SIGURG,
        signal.SIGHUP,
        signal.SIGALRM,
        signal.SIGWINCH,
    )

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self._old = {}

    def install(self) -> None:
        for sig in self.SIGNALS:
            self._old[sig] = signal.signal(sig, self._handle)

    def _handle(self, signum, _frame) -> None:
        self.counts[signum] = self.counts.get(signum, 0) + 1

    def restore(self) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)


# ---------------------------------------------------------------------- simulator
@dataclass
class EeRecorder:
    """A ``SimRobot.observers`` entry, called after every simulation step. It records the
    end-effector site (``world.ee_pose().position``) in ``sites`` and the tool centre point
    (the point the policy's targets are about, 2.6 cm from the site) in ``points``."""

    session: object
    points: list = field(default_factory=list)
    sites: list = field(default_factory=list)

    def __call__(self) -> None:
        self.sites.append(self.current_site())
        self.points.append(self.current())

    def current(self) -> tuple[float, float, float]:
        return tuple(float(v) for v in self.session.primitives.tool_point())

    def current_site(self) -> tuple[float, float, float]:
        return tuple(float(v) for v in self.session.world.ee_pose().position)


# ---------------------------------------------------------------------- running plans
@dataclass
class GuardedRun:
    outcome: object = None
    error: BaseException | None = None
    hung: bool = False
    killed: list = field(default_factory=list)


def run_guarded(runner, source: str, timeout: float, plan_policy=None) -> GuardedRun:
    """``runner.run(source)`` in a thread; if it has not returned after ``timeout`` seconds the
    host is hung: kill the sandbox child (which unblocks it) and report ``hung``."""
    result = GuardedRun()

    def target() -> None:
        try:
            result.outcome = runner.run(source, plan_policy=plan_policy)
        except BaseException as exc:  # reported to the test, never swallowed
            result.error = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        result.hung = True
        result.killed = kill_sandbox_children()
        thread.join(10.0)
    return result


def run_in_fresh_host(source: str, workdir: Path, timeout: float = 60.0) -> dict:
    """Run ``source`` in a new host process (own session and sim) and report what happened:
    {"returncode", "result" (the host's own report, or None if it died), "stderr"}."""
    payload, out = workdir / "payload.py", workdir / "result.json"
    payload.write_text(source)
    out.unlink(missing_ok=True)
    proc = subprocess.Popen(
        [sys.executable, __file__, "host", str(payload), str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env={**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")},
    )
    try:
        _, stderr = proc.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        kill_sandbox_children(proc.pid)
        proc.kill()
        _, stderr = proc.communicate()
        timed_out = True
    result = json.loads(out.read_text()) if out.exists() else None
    return {
        "returncode": proc.returncode,
        "result": result,
        "timed_out": timed_out,
        "stderr": stderr.decode("utf-8", "replace")[-2000:],
        "pid": proc.pid,
    }


def _host_main(payload_path: str, out_path: str) -> None:
    """The sacrificial host: a real session, backend, policy and runner; one plan."""
    from lang2policy.sandbox.policy import default_policy
    from lang2policy.sandbox.runner import SandboxLimits, SandboxRunner
    from lang2policy.session.sim import SimSession
    from lang2policy.skills.backend import SimSkillBackend

    session = SimSession("so101")
    session.reset(SEED, OBJECTS)
    runner = SandboxRunner(
        SimSkillBackend(session),
        default_policy(session.world.description),
        limits=SandboxLimits(wall_seconds=3, cpu_seconds=3, memory_mb=512),
        ast_check=False,
    )
    before = sched_state()
    outcome = runner.run(Path(payload_path).read_text())
    after = sched_state()
    leftover = {pid: cmdline(pid) for pid in child_pids()}
    Path(out_path).write_text(
        json.dumps(
            {
                "kind": outcome.kind,
                "message": outcome.message,
                "output": outcome.output,
                "before": before,
                "after": after,
                "children": leftover,
                "pid": os.getpid(),
            }
        )
    )


# ---------------------------------------------------------------------- kernel facts
def kernel_has_syscall(number: int) -> bool:
    """Whether this (x86_64) kernel implements syscall ``number`` (probed with a bad fd)."""
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    ctypes.set_errno(0)
    libc.syscall(
        ctypes.c_long(number),
        ctypes.c_long(-1),
        ctypes.c_char_p(b"/nonexistent/x"),
        ctypes.c_long(0),
        ctypes.c_long(0),
        ctypes.c_long(0),
    )
    return ctypes.get_errno() != errno.ENOSYS


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "host":
        _host_main(sys.argv[2], sys.argv[3])
    else:
        sys.exit("usage: redteam.py host PAYLOAD OUT")
