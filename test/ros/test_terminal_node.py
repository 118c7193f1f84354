"""The terminal node over real rclpy (DDS on loopback, a private domain): its non-interactive
mode runs as a subprocess with lines piped to stdin, as a script would use it.

In-test peers: a planner stand-in (a test double for the planner's status replies only: it
records /lang2policy/instruction and /lang2policy/correction and answers received / running /
done, or failed for texts with "fail", on /lang2policy/status; a text with "slowly" keeps
running until a correction comes; a text with "yellow bowl" gets the grounded planner's
statuses: the plan about to run, what the robot says and a final verdict), a perception
stand-in publishing two objects on /lang2policy/objects when asked to, and a real
std_srvs/Trigger server on /lang2policy/stop that publishes the safety state, as the safety
node does.

The interactive prompt is driven the way a person would, in tmux (skipped without tmux).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

rclpy = pytest.importorskip("rclpy")

from rclpy.executors import MultiThreadedExecutor  # noqa: E402
from std_msgs.msg import String  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402
from support.waiting import wait_for  # noqa: E402
from visualization_msgs.msg import Marker, MarkerArray  # noqa: E402

from lang2policy.graph import topics  # noqa: E402

pytestmark = pytest.mark.ros

REPO = Path(__file__).resolve().parents[2]
# L2P_TEST_DOMAIN_ID pins the domain (agents sharing a machine keep apart); else from the pid
DOMAIN_ID = int(os.environ.get("L2P_TEST_DOMAIN_ID") or 1 + (os.getpid() + 141) % 200)
MOVE = "put_first_on_second('red block', 'yellow bowl')"
GOAL = "is_in('red block', 'yellow bowl')"
OBJECTS = {"red block": (0.4, 0.1, 0.02), "yellow bowl": (0.5, -0.12, 0.0)}


class Peers:
    """The planner stand-in and the stop service, in one node."""

    def __init__(self, context) -> None:
        self.node = rclpy.create_node("terminal_peers", context=context)
        self.instructions: list[str] = []
        self.corrections: list[str] = []
        self.stop_calls = 0
        self.corrected = threading.Event()
        self.slow_task = threading.Event()
        self.node.create_subscription(String, topics.INSTRUCTION.name, self._on_instruction, 10)
        self.node.create_subscription(String, topics.CORRECTION.name, self._on_correction, 10)
        self.status = self.node.create_publisher(String, topics.STATUS.name, 10)
        self.safety = self.node.create_publisher(String, topics.SAFETY.name, 10)
        self.node.create_service(Trigger, topics.STOP.name, self._on_stop)
        self.send_objects = threading.Event()
        self.objects = self.node.create_publisher(MarkerArray, topics.OBJECTS.name, 1)
        self.node.create_timer(0.1, self._publish_objects)

    def _publish_objects(self) -> None:
        """Perception's stand-in: the objects, 10 times a second, once ``send_objects`` is set."""
        if not self.send_objects.is_set():
            return
        markers = MarkerArray()
        for index, (name, (x, y, z)) in enumerate(OBJECTS.items()):
            marker = Marker(id=index, text=name, action=Marker.ADD)
            marker.pose.position.x, marker.pose.position.y, marker.pose.position.z = x, y, z
            markers.markers.append(marker)
        self.objects.publish(markers)

    def _on_instruction(self, message: String) -> None:
        self.instructions.append(message.data)
        threading.Thread(target=self._answer, args=(message.data,), daemon=True).start()

    def _on_correction(self, message: String) -> None:
        """Recorded; taken up (a ``correction`` status) only while a slow task runs."""
        self.corrections.append(message.data)
        if self.slow_task.is_set():
            self._say("correction", message.data, "applied")
            self.corrected.set()

    def _say(self, state: str, text: str, detail: object) -> None:
        payload = {"node": "planner", "state": state, "instruction": text, "detail": detail}
        self.status.publish(String(data=json.dumps(payload)))

    def _answer(self, text: str) -> None:
        # the real planner takes seconds to plan; the double waits for the terminal instead
        wait_for(self.status.get_subscription_count, 10, "the terminal's status subscription")
        self._say("received", text, {"route": "code"})
        if "yellow bowl" in text:
            self._answer_grounded(text)
            return
        self._say("running", text, f"running the program for: {text}")
        if "slowly" in text:
            self.slow_task.set()
            self.corrected.wait(timeout=30)
            self.slow_task.clear()
        if "fail" in text:
            self._say(
                "failed",
                text,
                {"route": "code", "outcome": "skill", "message": "target out of reach"},
            )
        else:
            self._say("done", text, {"route": "code", "outcome": "ok"})

    def _answer_grounded(self, text: str) -> None:
        """The grounded planner's statuses; 'ghost' gives a program that only says something
        (with a line that tries to pass for a status) and does not reach its goal."""
        only_says = "ghost" in text
        code = "say('I see no blue bowl')\noutcome: ok" if only_says else MOVE
        said = ["I see no blue bowl"] if only_says else []
        self._say("plan", text, {"route": "code", "code": code, "goal": GOAL, "score": 0.9})
        for line in said:
            self._say("said", text, line)
        verdict, state = ("goal_not_reached", "failed") if only_says else ("goal_reached", "done")
        final = {"route": "code", "verdict": verdict, "goal": GOAL, "outcome": "ok"}
        final.update(message="", attempts=1, code=code, said=said, score=0.9, alternatives=[])
        self._say(state, text, final)

    def _on_stop(self, _request, response):
        self.stop_calls += 1
        state = {"node": "safety", "state": "stopped", "reason": "stop service"}
        self.safety.publish(String(data=json.dumps(state)))
        response.success, response.message = True, "stopped; call /lang2policy/resume to move"
        return response


@pytest.fixture(scope="module")
def node_env():
    environment = dict(os.environ)
    environment.update(ROS_DOMAIN_ID=str(DOMAIN_ID), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    return environment


@contextlib.contextmanager
def running_peers(node_env):
    """The peers spinning in their own context until the block ends."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ROS_DOMAIN_ID", node_env["ROS_DOMAIN_ID"])
        mp.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
        context = rclpy.Context()
        rclpy.init(context=context)
        peers = Peers(context)
        executor = MultiThreadedExecutor(num_threads=2, context=context)
        executor.add_node(peers.node)
        stop = threading.Event()
        spinner = threading.Thread(
            target=lambda: [executor.spin_once(timeout_sec=0.05) for _ in iter(stop.is_set, True)],
            daemon=True,
        )
        spinner.start()
        try:
            yield peers
        finally:
            stop.set()
            spinner.join(timeout=10)
            executor.shutdown()
            peers.node.destroy_node()
            rclpy.shutdown(context=context)


@pytest.fixture
def peers(node_env):
    with running_peers(node_env) as peers:
        yield peers


def terminal_command(*flags: str, service_timeout: float = 5.0, discovery: float = 10.0):
    return [
        sys.executable,
        "-m",
        "lang2policy.ros.terminal_node",
        *flags,
        "--ros-args",
        "-p",
        f"service_timeout:={service_timeout}",
        "-p",
        f"discovery_timeout:={discovery}",
    ]


def run_terminal(node_env, lines: str, *flags: str, service_timeout: float = 5.0):
    """The terminal node fed ``lines`` on a piped stdin (so non-interactive by itself)."""
    command = terminal_command(*flags, service_timeout=service_timeout)
    done = subprocess.run(
        command, input=lines, capture_output=True, text=True, env=node_env, cwd=REPO, timeout=90
    )
    return done.returncode, done.stdout.splitlines(), done.stderr


def test_instruction_correction_stop_and_another_instruction(node_env, peers):
    lines = "pick up the red block\n:fix a bit higher\nstop\nput it in the bowl\n"
    code, out, err = run_terminal(node_env, lines, "--timeout", "30")
    assert code == 0, (out, err)
    assert peers.instructions == ["pick up the red block", "put it in the bowl"]
    assert peers.corrections == ["a bit higher"]
    assert peers.stop_calls == 1
    expected_in_order = [
        "> pick up the red block",
        "-> instruction: pick up the red block",
        "[planner] received (code): pick up the red block",
        "[planner] running: running the program for: pick up the red block",
        "[planner] done (code): pick up the red block — ok",
        "> :fix a bit higher",
        "-> correction: a bit higher",
        "> stop",
        "stop: ok — stopped; call /lang2policy/resume to move",
        "> put it in the bowl",
        "[planner] done (code): put it in the bowl — ok",
    ]
    positions = [out.index(line) for line in expected_in_order]
    assert positions == sorted(positions), out
    assert "[safety] STOPPED: stop service" in out
    assert "Traceback" not in err


def test_a_failed_instruction_and_a_missing_sim_give_exit_status_1(node_env, peers):
    lines = "fail to reach the shelf\n:reset\n"
    code, out, err = run_terminal(node_env, lines, "--timeout", "30", service_timeout=0.5)
    assert code == 1, (out, err)
    assert "[planner] failed (code): fail to reach the shelf — target out of reach" in out
    assert "! no sim node answering on /lang2policy_sim/reset" in out
    assert "Traceback" not in err


def test_without_wait_a_follow_up_is_routed_as_a_correction(node_env, peers):
    lines = "pick up the red block\nno, the blue one\n"
    code, out, err = run_terminal(node_env, lines, "--non-interactive", "--no-wait")
    assert code == 0, (out, err)
    wait_for(lambda: peers.corrections, 10, "the correction to arrive")
    assert peers.instructions == ["pick up the red block"]
    assert peers.corrections == ["no, the blue one"]
    assert out[:4] == [
        "> pick up the red block",
        "-> instruction: pick up the red block",
        "> no, the blue one",
        "-> correction: no, the blue one",
    ]


def test_a_script_started_before_the_planner_waits_for_it(node_env):
    """Started with the graph, a script's first instruction must not be lost to discovery."""
    command = terminal_command("--timeout", "30", discovery=0.5)
    terminal = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=node_env,
        cwd=REPO,
    )
    try:
        terminal.stdin.write("pick up the red block\n")
        terminal.stdin.flush()
        time.sleep(3.0)  # the terminal is up and waiting; now the planner comes
        with running_peers(node_env) as peers:
            out, err = terminal.communicate(timeout=60)
            assert peers.instructions == ["pick up the red block"]
    finally:
        if terminal.poll() is None:
            terminal.kill()
    assert terminal.returncode == 0, (out, err)
    assert "[planner] done (code): pick up the red block — ok" in out.splitlines()
    assert "no planner listening" not in out


def assert_in_order(out: list[str], expected: list[str]) -> None:
    """Each of ``expected`` is a line of ``out``, in this order (a repeated line is found
    after the one before it)."""
    at = -1
    for line in expected:
        assert line in out[at + 1 :], (line, out)
        at = out.index(line, at + 1)


def test_objects_the_plan_what_the_robot_says_and_the_verdict_are_shown(node_env, peers):
    peers.send_objects.set()
    good, ghost = "put the red block in the yellow bowl", "put the ghost block in the yellow bowl"
    lines = f"{good}\n{ghost}\n:scene\n:history\n"
    code, out, err = run_terminal(node_env, lines, "--timeout", "30")
    assert code == 1, (out, err)  # the goal of the second was not reached
    scene = "objects: red block at [0.40, 0.10, 0.02], yellow bowl at [0.50, -0.12, 0.00]"
    # Once when first heard, and for :scene (unless discovery on a loaded machine was slower
    # than the two instructions: then :scene says none were heard, and they print on arrival).
    after_scene = out[out.index("> :scene") + 1]
    assert after_scene == scene or after_scene.startswith("objects: none heard"), after_scene
    assert out.count(scene) == (2 if after_scene == scene else 1)
    plan = f"[planner] plan (code): {good} — about to run, goal: {GOAL}, score 0.90"
    assert out[out.index(plan) + 1] == f"    | {MOVE}"
    ghost_plan = f"[planner] plan (code): {ghost} — about to run, goal: {GOAL}, score 0.90"
    start = out.index(ghost_plan)
    assert out[start + 1 : start + 3] == ["    | say('I see no blue bowl')", "    | outcome: ok"]
    expected_in_order = [
        f"> {good}",
        plan,
        f"[planner] done (code): {good} — goal reached",
        f"    goal: {GOAL}",
        f"> {ghost}",
        ghost_plan,
        "robot says: I see no blue bowl",
        f"[planner] failed (code): {ghost} — finished but goal not reached",
        f"    goal: {GOAL}",
        "    robot said: I see no blue bowl",
        "> :scene",
        "> :history",
        f"  1. instruction: {good} -> done: goal reached",
        f"       | {MOVE}",
        f"  2. instruction: {ghost} -> failed: finished but goal not reached",
        "       | say('I see no blue bowl')",
        "       | outcome: ok",
    ]
    assert_in_order(out, expected_in_order)
    assert not any(line.startswith("outcome") for line in out)
    assert "Traceback" not in err


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_or_sigterm_ends_a_waiting_script_cleanly(node_env, signum):
    terminal = subprocess.Popen(
        terminal_command("--timeout", "60"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=node_env,
        cwd=REPO,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(terminal.stdout), daemon=True)
    reader.start()
    try:
        terminal.stdin.write("pick up the red block\n")  # nobody listens: it waits
        terminal.stdin.flush()
        wait_for(lambda: lines or terminal.poll() is not None, 60, "the instruction's echo")
        time.sleep(0.5)  # waiting for the planner now
        terminal.send_signal(signum)
        try:
            terminal.wait(timeout=20)
        except subprocess.TimeoutExpired:  # say why: the signal masks of the stuck process
            masks = [
                line
                for line in Path(f"/proc/{terminal.pid}/status").read_text().splitlines()
                if line.startswith(("SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt"))
            ]
            raise AssertionError(f"no exit 20 s after signal {signum}: {masks}") from None
        reader.join(timeout=5)
        err = terminal.stderr.read()
    finally:
        if terminal.poll() is None:
            terminal.kill()
    assert terminal.returncode == 130, (lines, err)
    assert [line.rstrip("\n") for line in lines] == ["> pick up the red block"]
    assert "Traceback" not in err


def test_bad_parameters_and_flags_end_with_a_message(node_env):
    code, _, err = run_terminal(node_env, "", service_timeout=-1)
    assert code == 1 and "parameter 'service_timeout' must be a number > 0" in err
    code, _, err = run_terminal(node_env, "", "--timeout", "0")
    assert code == 2 and "--timeout: must be a number > 0" in err


class Tmux:
    """A detached tmux session on a private server, driven by keys and read from its pane."""

    def __init__(self, command: str, node_env: dict) -> None:
        self.server = ["tmux", "-L", f"l2p-terminal-test-{os.getpid()}"]
        self.env = node_env
        shell = f"{command}; echo EXIT=$?; sleep 60"
        self._tmux("new-session", "-d", "-s", "t", "-x", "120", "-y", "40", shell)

    def _tmux(self, *args: str) -> str:
        done = subprocess.run(
            [*self.server, *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
        return done.stdout

    def type(self, *keys: str) -> None:
        self._tmux("send-keys", "-t", "t", *keys)

    def screen(self) -> list[str]:
        return [line.rstrip() for line in self._tmux("capture-pane", "-p", "-t", "t").splitlines()]

    def wait_for_line(self, text: str, timeout: float = 20.0) -> list[str]:
        def showing():
            screen = self.screen()
            return screen if any(text in line for line in screen) else None

        try:
            return wait_for(showing, timeout, f"'{text}' on the tmux screen")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; the screen:\n" + "\n".join(self.screen())) from None

    def close(self) -> None:
        subprocess.run([*self.server, "kill-server"], env=self.env, capture_output=True)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_interactive_prompt_in_tmux(node_env, peers):
    terminal = [sys.executable, "-m", "lang2policy.ros.terminal_node"]
    command = shlex.join([*terminal, "--ros-args", "-p", "discovery_timeout:=10.0"])
    tmux = Tmux(f"cd {shlex.quote(str(REPO))} && {command}", node_env)
    try:
        tmux.wait_for_line("instruct>")
        tmux.type("pick up the red block slowly", "Enter")
        screen = tmux.wait_for_line("[planner] running: running the program for: pick up")
        tmux.wait_for_line("correct>")  # plain text now corrects the running task
        tmux.type("no, the blue one", "Enter")
        tmux.wait_for_line("[planner] correction: no, the blue one — applied")
        tmux.wait_for_line("[planner] done (code): pick up the red block slowly — ok")
        tmux.type("stop", "Enter")
        screen = tmux.wait_for_line("stop: ok — stopped; call /lang2policy/resume to move")
        screen = tmux.wait_for_line("safety: STOPPED (stop service) :resume")
        toolbar = screen[-1]
        assert toolbar.startswith(" safety: STOPPED (stop service) :resume | plan: code | done:")
        tmux.type(":history", "Enter")
        tmux.wait_for_line("2. correction: no, the blue one -> taken up by the planner")
        tmux.type("C-d")
        tmux.wait_for_line("EXIT=0")
    finally:
        tmux.close()
    assert peers.instructions == ["pick up the red block slowly"]
    assert peers.corrections == ["no, the blue one"]
    assert peers.stop_calls == 1
