"""Record/replay cache: keys, the three modes, misses, and a file cut off mid-line."""

from __future__ import annotations

import hashlib
import json
import logging

import pytest

from lang2policy.errors import ConfigError, LLMResponseError, ReplayMissError
from lang2policy.llm import (
    CachingClient,
    ExchangeCache,
    LLMReply,
    LLMRequest,
    build_request,
    local_config,
    make_client,
)

CONFIG = local_config()
PROMPT = "# put the red block on the blue bowl\n"


class StubLive:
    """Stands in for the live ``LLMClient``: answers ``send`` with a numbered reply."""

    def __init__(self, finish_reason: str = "stop") -> None:
        self.sent: list[LLMRequest] = []
        self.finish_reason = finish_reason

    def send(self, request: LLMRequest) -> LLMReply:
        self.sent.append(request)
        return LLMReply(
            text=f"answer {len(self.sent)}",
            finish_reason=self.finish_reason,
            prompt_tokens=11,
            completion_tokens=4,
            latency_s=0.25,
            model=request.model,
        )


def caching(path, mode, live=None) -> CachingClient:
    return CachingClient(ExchangeCache(path), mode, config=CONFIG, live=live)


def test_request_key_is_sha256_of_the_canonical_json():
    request = LLMRequest(
        model="gemma-3-270m",
        mode="completion",
        prompt="# stack the blocks\n",
        messages=None,
        stop=("\n#",),
        max_tokens=128,
        temperature=0.0,
    )
    canonical = (
        '{"max_tokens":128,"mode":"completion","model":"gemma-3-270m",'
        '"prompt":"# stack the blocks\\n","stop":["\\n#"],"temperature":0.0}'
    )
    assert request.key() == hashlib.sha256(canonical.encode()).hexdigest()
    # Pinned: changing the canonical form would orphan every recorded file.
    assert request.key() == "977b9748660ac6ccb95764bc5c2485ed23e048859b1c63085e14c33d62ead708"


def test_request_key_depends_on_every_call_parameter():
    base = build_request(CONFIG, PROMPT, stop=["\n#"])
    assert build_request(CONFIG, PROMPT, stop=("\n#",), temperature=0).key() == base.key()
    variants = [
        build_request(CONFIG, PROMPT + " ", stop=["\n#"]),
        build_request(CONFIG, PROMPT, stop=["\n"]),
        build_request(CONFIG, PROMPT, stop=["\n#"], max_tokens=64),
        build_request(CONFIG, PROMPT, stop=["\n#"], temperature=0.7),
        build_request(CONFIG.replace(model="other"), PROMPT, stop=["\n#"]),
        build_request(CONFIG.replace(mode="chat"), PROMPT, stop=["\n#"]),
    ]
    assert len({v.key() for v in variants} | {base.key()}) == len(variants) + 1


def test_requests_survive_the_round_trip_through_json():
    chat = build_request(CONFIG.replace(mode="chat"), [{"role": "user", "content": "hi"}])
    for request in (chat, build_request(CONFIG, PROMPT, stop="\n#")):
        again = LLMRequest.from_dict(json.loads(json.dumps(request.to_dict())))
        assert again == request and again.key() == request.key()


def test_record_appends_every_call_without_secrets(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-in-files")
    path = tmp_path / "rec" / "exchanges.jsonl"
    live = StubLive()
    client = caching(path, "record", live)
    assert client.complete(PROMPT).text == "answer 1"
    assert client.complete(PROMPT).text == "answer 2"  # record mode always goes live

    lines = path.read_text().splitlines()
    assert len(lines) == 2 and len(live.sent) == 2
    record = json.loads(lines[0])
    assert set(record) == {"key", "request", "response", "recorded_at"}
    assert record["key"] == live.sent[0].key()
    assert record["request"]["prompt"] == PROMPT
    assert record["response"]["text"] == "answer 1"
    assert record["response"]["completion_tokens"] == 4
    assert "sk-never-in-files" not in path.read_text()


def test_replay_answers_from_the_file_and_the_latest_record_wins(tmp_path, caplog):
    path = tmp_path / "exchanges.jsonl"
    recorder = caching(path, "record", StubLive())
    recorder.complete(PROMPT)
    recorder.complete(PROMPT)

    caplog.set_level(logging.INFO, logger="lang2policy.llm")
    reply = caching(path, "replay").complete(PROMPT)
    assert reply.text == "answer 2" and reply.cached is True
    assert (reply.prompt_tokens, reply.finish_reason) == (11, "stop")
    assert "cached=True" in caplog.records[-1].getMessage()


def test_replay_miss_names_the_hash_and_the_file(tmp_path):
    path = tmp_path / "exchanges.jsonl"
    caching(path, "record", StubLive()).complete(PROMPT)
    other = "# stack all the blocks\n"
    key = build_request(CONFIG, other).key()
    with pytest.raises(ReplayMissError, match=rf"{key}.*{path}.*1 exchanges"):
        caching(path, "replay").complete(other)


def test_replay_answers_a_prompt_whose_measured_numbers_moved_when_one_record_matches(
    tmp_path, caplog
):
    path = tmp_path / "exchanges.jsonl"
    was = "# put the red block in the bowl\n# (the red block was at [{}, -0.07, 0.01])\n"
    caching(path, "record", StubLive()).complete(was.format("0.25"))

    caplog.set_level(logging.WARNING, logger="lang2policy.llm")
    reply = caching(path, "replay").complete(was.format("0.26"))
    assert reply.text == "answer 1" and reply.cached is True
    assert "differs from it only in decimal numbers" in caplog.text
    # the words still have to match
    with pytest.raises(ReplayMissError):
        caching(path, "replay").complete(was.format("0.26").replace("red", "blue"))


def test_replay_misses_when_several_records_differ_only_in_numbers(tmp_path):
    path = tmp_path / "exchanges.jsonl"
    recorder = caching(path, "record", StubLive())
    for x in ("0.25", "0.27"):
        recorder.complete(f"# go to [{x}, 0.1]\n")
    replay = caching(path, "replay")
    assert replay.complete("# go to [0.27, 0.1]\n").text == "answer 2"  # exact still wins
    with pytest.raises(ReplayMissError):
        replay.complete("# go to [0.26, 0.1]\n")


def test_read_through_calls_live_only_on_a_miss(tmp_path):
    path = tmp_path / "exchanges.jsonl"
    live = StubLive()
    client = caching(path, "read-through", live)
    first, second = client.complete(PROMPT), client.complete(PROMPT)
    assert (first.cached, second.cached) == (False, True)
    assert first.text == second.text == "answer 1"
    assert len(live.sent) == 1 and len(path.read_text().splitlines()) == 1


def test_truncated_last_line_is_skipped_with_a_warning_and_appends_stay_valid(tmp_path, caplog):
    path = tmp_path / "exchanges.jsonl"
    caching(path, "record", StubLive()).complete(PROMPT)
    path.write_text(path.read_text() + '{"key": "abc", "request": {"mod')  # crash mid-write

    caplog.set_level(logging.WARNING, logger="lang2policy.llm")
    cache = ExchangeCache(path)
    assert len(cache) == 1
    assert "exchanges.jsonl:2: skipping unreadable last line" in caplog.text

    client = CachingClient(cache, "read-through", config=CONFIG, live=StubLive())
    client.complete("# another instruction\n")
    reloaded = ExchangeCache(path)
    assert len(reloaded) == 2
    assert json.loads(path.read_text().splitlines()[-1])["response"]["text"] == "answer 1"


def test_a_recorded_truncated_answer_replays_as_the_same_error(tmp_path):
    path = tmp_path / "exchanges.jsonl"
    with pytest.raises(LLMResponseError, match="max_tokens=256"):
        caching(path, "record", StubLive(finish_reason="length")).complete(PROMPT)
    with pytest.raises(LLMResponseError, match="max_tokens=256"):
        caching(path, "replay").complete(PROMPT)


def test_modes_and_specs_are_validated(tmp_path):
    with pytest.raises(ConfigError, match=r"\['replay', 'record', 'read-through'\]"):
        caching(tmp_path / "x.jsonl", "write")
    with pytest.raises(ConfigError, match="needs a live client"):
        caching(tmp_path / "x.jsonl", "record")
    with pytest.raises(ConfigError, match="replay file not found"):
        make_client(f"replay:{tmp_path / 'missing.jsonl'}")


def test_make_client_replay_uses_the_local_config_without_a_server(tmp_path):
    path = tmp_path / "exchanges.jsonl"
    caching(path, "record", StubLive()).complete(PROMPT, stop=["\n#"])
    client = make_client(f"replay:{path}")
    assert client.complete(PROMPT, stop=["\n#"]).text == "answer 1"


APPEND_MANY = """
import sys
from lang2policy.llm import ExchangeCache, LLMReply, build_request, local_config
path, worker = sys.argv[1], int(sys.argv[2])
cache = ExchangeCache(path)
for number in range(40):
    request = build_request(local_config(), f"# worker {worker} instruction {number}\\n")
    text = f"{worker}-{number} " + "x" * 20_000  # longer than one pipe-buffer write
    cache.put(request, LLMReply(text=text, finish_reason="stop", prompt_tokens=1,
                                completion_tokens=1, latency_s=0.1, model=request.model))
"""


def test_worker_processes_recording_into_one_file_keep_every_record_whole(tmp_path):
    # As the workers of `bench cap --llm record:FILE --workers N` do: each its own cache.
    import subprocess
    import sys

    path = str(tmp_path / "shared.jsonl")
    workers = [
        subprocess.Popen([sys.executable, "-c", APPEND_MANY, path, str(w)]) for w in range(3)
    ]
    assert [process.wait(timeout=120) for process in workers] == [0, 0, 0]
    lines = (tmp_path / "shared.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 120
    assert all(json.loads(line)["response"]["text"].endswith("x" * 100) for line in lines)
    assert len(ExchangeCache(path)) == 120
