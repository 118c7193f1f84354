"""LLMClient against a real HTTP server on loopback that speaks the OpenAI completion APIs.

The server is a test double for a paid API: ``http.server`` in a thread, answering
/v1/completions and /v1/chat/completions from a script of (status, body, delay) replies.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from lang2policy.config import load_dataclass
from lang2policy.errors import (
    ConfigError,
    LLMAuthError,
    LLMRequestError,
    LLMResponseError,
    LLMTimeoutError,
    LLMUnavailableError,
)
from lang2policy.llm import LLMClient, LLMConfig, make_client

KEY_ENV = "L2P_TEST_LLM_KEY"
SECRET = "sk-test-secret-123"


def completion_body(text: str, finish: str = "stop") -> dict:
    return {
        "id": "cmpl-1",
        "object": "text_completion",
        "created": 0,
        "model": "fake-model",
        "choices": [{"index": 0, "text": text, "finish_reason": finish, "logprobs": None}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
    }


def chat_body(text: str, finish: str = "stop") -> dict:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "fake-model",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": finish,
            }
        ],
        "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11},
    }


def error_body(message: str) -> dict:
    return {"error": {"message": message, "type": "test_error", "code": None}}


class FakeOpenAIServer:
    """Answers from ``script`` (a queue of (status, body, delay_s)), else with a default success."""

    def __init__(self) -> None:
        self.script: deque[tuple[int, dict, float]] = deque()
        self.requests: list[dict] = []
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def then(self, status: int, body: dict, delay_s: float = 0.0) -> FakeOpenAIServer:
        self.script.append((status, body, delay_s))
        return self

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                server.requests.append(
                    {"path": self.path, "auth": self.headers.get("Authorization"), "body": body}
                )
                if server.script:
                    status, reply, delay_s = server.script.popleft()
                elif self.path.endswith("/chat/completions"):
                    status, reply, delay_s = 200, chat_body("ok"), 0.0
                else:
                    status, reply, delay_s = 200, completion_body("ok"), 0.0
                time.sleep(delay_s)
                data = json.dumps(reply).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

            def log_message(self, *args: object) -> None:
                pass

        return Handler


@pytest.fixture
def openai_server():
    fake = FakeOpenAIServer()
    fake.thread.start()
    yield fake
    fake.httpd.shutdown()
    fake.httpd.server_close()


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)


def make(openai_server: FakeOpenAIServer, **overrides) -> LLMClient:
    fields = dict(
        model="fake-model",
        base_url=openai_server.base_url,
        api_key_env=KEY_ENV,
        mode="completion",
        timeout_s=5.0,
        max_retries=2,
        backoff_s=0.01,
        max_tokens=32,
    )
    fields.update(overrides)
    return LLMClient(LLMConfig(**fields))


def test_completion_success_sends_the_request_and_logs_one_line(openai_server, caplog):
    openai_server.then(200, completion_body("put_first_on_second('a', 'b')"))
    caplog.set_level(logging.INFO, logger="lang2policy.llm")
    reply = make(openai_server).complete("# put a on b\n", stop=["\n#"], temperature=0.5)

    assert reply.text == "put_first_on_second('a', 'b')"
    assert (reply.finish_reason, reply.prompt_tokens, reply.completion_tokens) == ("stop", 7, 3)
    assert reply.model == "fake-model" and reply.cached is False and reply.latency_s > 0
    [sent] = openai_server.requests
    assert sent["path"] == "/v1/completions"
    assert sent["auth"] == f"Bearer {SECRET}"
    assert sent["body"]["prompt"] == "# put a on b\n"
    assert (sent["body"]["stop"], sent["body"]["max_tokens"]) == (["\n#"], 32)
    assert sent["body"]["temperature"] == 0.5

    lines = [r.getMessage() for r in caplog.records if r.name == "lang2policy.llm"]
    assert len(lines) == 1
    assert "model=fake-model mode=completion latency=" in lines[0]
    assert "prompt_tokens=7 completion_tokens=3" in lines[0] and "cached=False" in lines[0]
    assert SECRET not in caplog.text


def test_chat_mode_sends_messages(openai_server):
    openai_server.then(200, chat_body("hello"))
    reply = make(openai_server, mode="chat").complete("hi")
    assert reply.text == "hello" and reply.prompt_tokens == 9
    [sent] = openai_server.requests
    assert sent["path"] == "/v1/chat/completions"
    assert sent["body"]["messages"] == [{"role": "user", "content": "hi"}]
    assert "stop" not in sent["body"]

    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "go"}]
    make(openai_server, mode="chat").complete(messages)
    assert openai_server.requests[-1]["body"]["messages"] == messages


def test_retries_on_503_then_succeeds(openai_server, caplog):
    openai_server.then(503, error_body("overloaded")).then(503, error_body("overloaded"))
    openai_server.then(200, completion_body("done"))
    reply = make(openai_server).complete("x")
    assert reply.text == "done"
    assert len(openai_server.requests) == 3
    assert sum("retry" in r.getMessage() for r in caplog.records) == 2


def test_rate_limit_is_retried(openai_server):
    openai_server.then(429, error_body("slow down")).then(200, completion_body("done"))
    assert make(openai_server).complete("x").text == "done"
    assert len(openai_server.requests) == 2


def test_503_until_retries_run_out(openai_server):
    for _ in range(3):
        openai_server.then(503, error_body("overloaded"))
    with pytest.raises(LLMUnavailableError, match=r"HTTP 503.*after 3 attempts") as info:
        make(openai_server).complete("x")
    assert openai_server.base_url in str(info.value)
    assert len(openai_server.requests) == 3


def test_401_is_an_auth_error_naming_the_env_var_and_not_retried(openai_server):
    openai_server.then(401, error_body(f"Incorrect API key provided: {SECRET}"))
    with pytest.raises(LLMAuthError, match=KEY_ENV) as info:
        make(openai_server).complete("x")
    assert SECRET not in str(info.value)
    assert len(openai_server.requests) == 1


def test_missing_key_env_var_fails_before_sending(openai_server, monkeypatch):
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(LLMAuthError, match=f"{KEY_ENV}, which should hold the API key"):
        make(openai_server)
    assert openai_server.requests == []


def test_other_4xx_is_a_request_error_and_not_retried(openai_server):
    openai_server.then(400, error_body("max_tokens is too large"))
    with pytest.raises(LLMRequestError, match="max_tokens is too large"):
        make(openai_server).complete("x")
    assert len(openai_server.requests) == 1


def test_timeout_names_the_seconds_and_is_not_retried(openai_server):
    openai_server.then(200, completion_body("late"), delay_s=2.0)
    start = time.monotonic()
    with pytest.raises(LLMTimeoutError, match=r"within 0\.3 s"):
        make(openai_server, timeout_s=0.3).complete("x")
    assert time.monotonic() - start < 1.5
    assert len(openai_server.requests) == 1


def test_empty_answer_is_an_error_with_the_reply_attached(openai_server):
    openai_server.then(200, completion_body("  \n"))
    with pytest.raises(LLMResponseError, match="empty answer") as info:
        make(openai_server).complete("x", stop=["\n"])
    assert info.value.reply.finish_reason == "stop"


def test_truncated_answer_names_max_tokens(openai_server):
    openai_server.then(200, completion_body("for block in blocks:", finish="length"))
    with pytest.raises(LLMResponseError, match=r"max_tokens=16 \(finish_reason 'length'\)") as info:
        make(openai_server).complete("x", max_tokens=16)
    assert info.value.reply.text == "for block in blocks:"


def test_unreachable_server_names_the_url():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once the socket is closed
    url = f"http://127.0.0.1:{port}/v1"
    client = LLMClient(
        LLMConfig(model="m", base_url=url, api_key_env=None, max_retries=1, backoff_s=0.0)
    )
    with pytest.raises(LLMUnavailableError, match=rf"cannot reach the LLM server at {url}.*2 att"):
        client.complete("x")


def test_completion_mode_rejects_chat_messages(openai_server):
    with pytest.raises(LLMRequestError, match="mode='chat'"):
        make(openai_server).complete([{"role": "user", "content": "hi"}])
    assert openai_server.requests == []


def test_config_is_validated_and_loads_from_yaml_data():
    with pytest.raises(ConfigError, match=r"\['chat', 'completion'\]"):
        LLMConfig(model="m", base_url="http://x/v1", mode="instruct")
    with pytest.raises(ConfigError, match="http://"):
        LLMConfig(model="m", base_url="localhost:8080")
    data = {"model": "m", "base_url": "http://127.0.0.1:1/v1", "stop": ["\n#"], "max_retries": 0}
    config = load_dataclass(LLMConfig, data, "llm.yaml")
    assert config.stop == ("\n#",) and config.api_key_env == "OPENAI_API_KEY"


def test_make_client_openai_reads_the_environment(openai_server, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("OPENAI_MODEL", "gpt-test")
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    client = make_client("openai")
    assert client.complete("hi").text == "ok"
    assert openai_server.requests[0]["body"]["model"] == "gpt-test"
    assert openai_server.requests[0]["path"] == "/v1/chat/completions"


def test_make_client_rejects_unknown_specs():
    with pytest.raises(ConfigError, match="valid: local, openai, replay:FILE"):
        make_client("gpt")


def test_workers_reach_the_local_server_the_parent_started(openai_server, monkeypatch, tmp_path):
    """``shared_server_url`` starts the local server once (here: the fake stands in for it);
    a worker's ``make_client(spec, server_url=URL)`` reaches it and starts none of its own."""
    from lang2policy.llm import factory

    class Started:
        base_url = openai_server.base_url

    monkeypatch.setattr(factory, "get_local_server", lambda: Started)
    url = factory.shared_server_url("local")
    assert url == openai_server.base_url
    assert factory.shared_server_url(f"cache:{tmp_path / 'c.jsonl'}") == url
    monkeypatch.setattr(factory, "get_local_server", lambda: pytest.fail("a second server"))
    openai_server.then(200, completion_body("ok"))
    client = make_client("local", server_url=url)
    assert client.config.base_url == url and client.complete("hi").text == "ok"
    assert openai_server.requests[0]["path"] == "/v1/completions"
    assert factory.shared_server_url("openai") is None  # no local server to share
    with pytest.raises(ConfigError, match="replay file not found"):
        factory.shared_server_url(f"replay:{tmp_path / 'none.jsonl'}")
    with pytest.raises(ConfigError, match="valid: local, openai"):
        factory.shared_server_url("gpt")
