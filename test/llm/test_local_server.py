"""The real local model: llama.cpp's server with Gemma 3 270M, started from the packaged GGUF.

Gemma 3 270M is a base model, so the prompt is few-shot Code as Policies in completion mode:
examples with the instruction as a comment, then the new instruction.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from lang2policy.errors import LLMUnavailableError
from lang2policy.llm import LocalModelServer, get_local_server, make_client

pytestmark = [pytest.mark.llm, pytest.mark.slow]

FEW_SHOT = """from robot_utils import put_first_on_second, get_obj_names

objects = ['yellow block', 'green block', 'green bowl', 'red bowl']
# put the yellow block on the green bowl.
put_first_on_second('yellow block', 'green bowl')
objects = ['cyan block', 'purple block', 'purple bowl', 'orange bowl']
# put the cyan block on the orange bowl.
put_first_on_second('cyan block', 'orange bowl')
"""
INSTRUCTION = "objects = ['red block', 'blue block', 'blue bowl', 'green bowl']\n" + (
    "# put the red block on the blue bowl.\n"
)
STOP = ["\n#", "\nobjects"]
# Starts a server, tells its pid, then waits to be killed.
STARTER = """
import sys
from lang2policy.llm import LocalModelServer
server = LocalModelServer(log_path=sys.argv[1]).start()
print(server.pid, flush=True)
import time; time.sleep(60)
"""


def test_local_model_writes_the_policy_line():
    start = time.monotonic()
    llm = make_client("local")
    started = time.monotonic()
    reply = llm.complete(FEW_SHOT + INSTRUCTION, stop=STOP)
    done = time.monotonic()
    print(
        f"\nlocal server start {started - start:.2f} s, first completion {done - started:.2f} s "
        f"({reply.prompt_tokens} prompt + {reply.completion_tokens} completion tokens): "
        f"{reply.text!r}"
    )
    code = reply.text.strip()
    assert code.startswith("put_first_on_second("), code
    assert "'red block'" in code and "'blue bowl'" in code, code
    assert reply.model and reply.cached is False


def test_the_local_server_is_shared_within_the_process():
    server = get_local_server()
    assert get_local_server() is server and server.running
    assert make_client("local").config.base_url == server.base_url


def test_record_then_replay_gives_the_same_answer(tmp_path):
    path = tmp_path / "local.jsonl"
    live = make_client(f"record:{path}").complete(FEW_SHOT + INSTRUCTION, stop=STOP)
    replayed = make_client(f"replay:{path}").complete(FEW_SHOT + INSTRUCTION, stop=STOP)
    assert (replayed.text, replayed.cached, live.cached) == (live.text, True, False)


def test_context_manager_stops_the_process_group_and_frees_the_port():
    with LocalModelServer() as server:
        pid, port = server.pid, server.port
        assert server.running
    assert not server.running
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)
    with socket.socket() as s, pytest.raises(ConnectionRefusedError):
        s.connect(("127.0.0.1", port))


def test_the_server_ends_itself_when_its_parent_is_killed(tmp_path):
    parent = subprocess.Popen(
        [sys.executable, "-c", STARTER, str(tmp_path / "server.log")],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        server_pid = int(parent.stdout.readline())
    finally:
        parent.kill()  # SIGKILL: no atexit, no cleanup in the parent
        parent.wait()
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline and _alive(server_pid):
        time.sleep(0.2)
    alive = _alive(server_pid)
    if alive:
        os.killpg(server_pid, signal.SIGKILL)
    assert not alive, "the llama.cpp server outlived the process that started it"


def _alive(pid: int) -> bool:
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_bad_model_file_fails_with_the_log_tail(tmp_path):
    bad = tmp_path / "not-a-model.gguf"
    bad.write_bytes(b"this is not a GGUF file")
    with pytest.raises(LLMUnavailableError, match=r"exited with code .* log .* ends with:\n"):
        LocalModelServer(bad, startup_timeout_s=60, log_path=tmp_path / "server.log").start()
