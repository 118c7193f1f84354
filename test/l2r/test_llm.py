"""Constrained decoding through the LLM layer: what goes over the wire, what the cache keys,
and (marked ``llm``) that the local llama.cpp server really decodes under a grammar."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from lang2policy.l2r.grammar import description_grammar, grammar_regex, ground_numbers
from lang2policy.l2r.planner import RewardPlanner
from lang2policy.llm import LLMClient, LLMConfig, build_request, make_client
from lang2policy.llm.cache import CachingClient, ExchangeCache

GRAMMAR = 'root ::= "banana" ("!" | "?")'
SCHEMA = {"type": "json_object", "schema": {"type": "object", "properties": {}}}


class Recorder(BaseHTTPRequestHandler):
    """Answers every POST with one fixed completion and keeps the request bodies."""

    bodies: ClassVar[list[dict]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Recorder.bodies.append({"path": self.path, **body})
        message = {"role": "assistant", "content": "banana!"}
        choice = ({"index": 0, "message": message, "finish_reason": "stop"}
                  if self.path.endswith("/chat/completions")
                  else {"index": 0, "text": "banana!", "finish_reason": "stop"})
        data = json.dumps({"id": "x", "object": "x", "created": 0, "model": "m",
                           "choices": [choice]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def base_url():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02})
    thread.start()
    Recorder.bodies = []
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


def config(base_url: str, mode: str) -> LLMConfig:
    return LLMConfig(model="m", base_url=base_url, api_key_env=None, mode=mode, timeout_s=5.0)


def test_grammar_and_response_format_go_in_the_request_body(base_url):
    completion = LLMClient(config(base_url, "completion"))
    assert completion.complete("x", grammar=GRAMMAR).text == "banana!"
    completion.complete("x")
    chat = LLMClient(config(base_url, "chat"))
    chat.complete("x", response_format=SCHEMA, grammar=GRAMMAR)
    first, plain, chatted = Recorder.bodies
    assert first["grammar"] == GRAMMAR and "response_format" not in first
    assert "grammar" not in plain and "response_format" not in plain
    assert chatted["path"].endswith("/chat/completions")
    assert chatted["response_format"] == SCHEMA and chatted["grammar"] == GRAMMAR


def test_the_grammar_is_part_of_the_cache_key_only_when_set(tmp_path, base_url):
    cfg = config(base_url, "completion")
    plain, constrained = build_request(cfg, "x"), build_request(cfg, "x", grammar=GRAMMAR)
    assert "grammar" not in plain.to_dict()  # keys recorded before this change still match
    assert plain.key() != constrained.key()
    cache = ExchangeCache(tmp_path / "x.jsonl")
    recorder = CachingClient(cache, "record", config=cfg, live=LLMClient(cfg))
    recorder.complete("x", grammar=GRAMMAR)
    replay = CachingClient(ExchangeCache(tmp_path / "x.jsonl"), "replay", config=cfg)
    assert replay.complete("x", grammar=GRAMMAR).cached
    with pytest.raises(Exception, match="replay miss"):
        replay.complete("x")


# ---------------------------------------------------------------- the real local server
@pytest.mark.llm
@pytest.mark.slow
def test_the_local_server_decodes_under_the_grammar():
    llm = make_client("local")
    reply = llm.complete("The capital of France is", max_tokens=8, grammar=GRAMMAR)
    assert reply.text in ("banana!", "banana?")  # never what the prompt asks for
    scene = {"red block": (0.2, 0.1, 0.01), "blue bowl": (0.22, -0.08, 0.0)}
    planner = RewardPlanner(llm, scene)
    instruction = "lift the red block 10 cm"
    prompt = planner.descriptor._request(instruction, planner.objects, planner.positions)
    grammar = description_grammar(list(scene), ["red block"], None,
                                  ground_numbers(instruction, ["red block"], scene))
    answer = llm.complete(prompt, max_tokens=200, grammar=grammar).text
    assert grammar_regex(grammar).fullmatch(answer), answer
