"""Record and replay LLM exchanges: a JSONL file indexed by request key.

Each line is one exchange::

    {"key": <sha256 of the request's canonical JSON>, "request": {...}, "response": {...},
     "recorded_at": "2026-11-21T10:00:00+00:00"}

``CachingClient`` puts a cache in front of a live client in one of three modes: ``replay``
(answers only from the file; a miss is a ``ReplayMissError``), ``record`` (always calls the
live client and appends) and ``read-through`` (a hit is answered from the file, a miss goes
live and is appended). Requests and replies hold no API keys, so neither does the file. A line
that does not parse (e.g. the last one, cut off by a crash mid-write), or breaks the bounds of
``wire_json.decode_json`` (nesting, number length, ``MAX_LINE_BYTES``), is skipped with a warning.

A replayed request that differs from every recorded one only in its decimal numbers (a camera's
estimate of where a block was, which moves by a centimetre between runs under a realism profile)
is answered by the one recorded exchange it matches that way, with a warning; when several
match, or none, it is a miss.
"""

from __future__ import annotations

import fcntl
import json
import logging
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Unpack

from lang2policy.errors import ConfigError, ReplayMissError
from lang2policy.llm.client import LLMClient, answer
from lang2policy.llm.config import LLMConfig
from lang2policy.llm.exchange import (
    CallOptions,
    LLMReply,
    LLMRequest,
    PromptOrMessages,
)
from lang2policy.wire_json import MessageError, decode_json_object

log = logging.getLogger("lang2policy.llm")

CACHE_MODES = ("replay", "record", "read-through")
MAX_LINE_BYTES = 64 << 20  # one exchange; a line beyond it (or nested too deep) is skipped


class ExchangeCache:
    """The exchanges of one JSONL file, loaded at construction; later records win."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._records: dict[str, dict[str, Any]] = {}
        self._number_blind: dict[str, set[str]] = {}  # number-blind key -> exact keys
        if self.path.exists():
            self._load()

    def __len__(self) -> int:
        return len(self._records)

    def __contains__(self, request: LLMRequest) -> bool:
        return request.key() in self._records

    def get(self, request: LLMRequest) -> dict[str, Any] | None:
        """The stored response dict for ``request``, or None."""
        record = self._records.get(request.key())
        return None if record is None else record["response"]

    def get_ignoring_numbers(self, request: LLMRequest) -> dict[str, Any] | None:
        """The stored response of the one exchange whose request differs from ``request``
        only in decimal numbers, or None when there is no such exchange or more than one."""
        keys = self._number_blind.get(request.number_blind_key(), set())
        if len(keys) != 1:
            return None
        return self._records[next(iter(keys))]["response"]

    def put(self, request: LLMRequest, reply: LLMReply) -> None:
        """Append one exchange to the file (created with its folder if needed) and index it."""
        record = {
            "key": request.key(),
            "request": request.to_dict(),
            "response": reply.to_dict(),
            "recorded_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        line = json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n"
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as f:
                # Worker processes of one benchmark may share the file: one writer at a time.
                fcntl.flock(f, fcntl.LOCK_EX)
                # Never glue a record onto a cut-off last line.
                separator = "\n" if _ends_mid_line(self.path) else ""
                f.write(separator + line)
                f.flush()
            self._index(request, record)

    def recorded_for(self) -> list[str]:
        """'model (mode)' of the stored requests, for error messages."""
        return sorted(
            {f"{r['request']['model']} ({r['request']['mode']})" for r in self._records.values()}
        )

    def _load(self) -> None:
        # Split on newlines only, as bytes: ``str.splitlines`` also cuts at U+2028 and U+0085,
        # which ``json.dumps(ensure_ascii=False)`` writes raw inside strings, and a line that is
        # not UTF-8 is skipped like any other unreadable line (``decode_json_object``).
        lines = self.path.read_bytes().split(b"\n")
        if lines and not lines[-1]:
            lines.pop()  # the newline that ends the last record
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                record = decode_json_object(
                    line, max_bytes=MAX_LINE_BYTES, what=f"{self.path.name}:{number}"
                )
                request = LLMRequest.from_dict(record["request"])
                if not isinstance(record["response"]["text"], str):
                    raise TypeError("response.text is not a string")
            except (MessageError, ValueError, KeyError, TypeError, AttributeError) as exc:
                where = "last line" if number == len(lines) else "line"
                log.warning(
                    "%s:%d: skipping unreadable %s (%s: %s)",
                    self.path,
                    number,
                    where,
                    type(exc).__name__,
                    exc,
                )
                continue
            key = request.key()
            if record.get("key") not in (None, key):
                log.warning(
                    "%s:%d: stored key does not match the request; using the request's hash %s",
                    self.path,
                    number,
                    key[:12],
                )
            self._index(request, record)

    def _index(self, request: LLMRequest, record: dict[str, Any]) -> None:
        key = request.key()
        record["key"] = key
        self._records[key] = record
        self._number_blind.setdefault(request.number_blind_key(), set()).add(key)


class CachingClient:
    """Same ``complete`` as ``LLMClient``, answered from an ``ExchangeCache`` per ``mode``."""

    def __init__(
        self,
        cache: ExchangeCache,
        mode: str,
        *,
        config: LLMConfig,
        live: LLMClient | None = None,
    ) -> None:
        if mode not in CACHE_MODES:
            raise ConfigError(f"cache mode {mode!r} is not one of {list(CACHE_MODES)}")
        if mode != "replay" and live is None:
            raise ConfigError(f"cache mode {mode!r} needs a live client to call")
        self.cache, self.mode, self.config, self.live = cache, mode, config, live

    def complete(
        self, prompt_or_messages: PromptOrMessages, **options: Unpack[CallOptions]
    ) -> LLMReply:
        """Like ``LLMClient.complete``; ``reply.cached`` tells whether the file answered."""
        return answer(self.config, prompt_or_messages, options, self._send)

    def _send(self, request: LLMRequest) -> LLMReply:
        """The recorded reply to ``request``, or (recording) the live one, then recorded."""
        reply = self._lookup(request) if self.mode != "record" else None
        if reply is None:
            if self.mode == "replay":
                raise self._miss_error(request)
            reply = self.live.send(request)
            self.cache.put(request, reply)
        return reply

    def _lookup(self, request: LLMRequest) -> LLMReply | None:
        start = time.monotonic()
        response = self.cache.get(request)
        if response is None and self.mode == "replay":
            response = self.cache.get_ignoring_numbers(request)
            if response is not None:
                log.warning(
                    "replay: request %s is not in %s; answered by the one recorded exchange "
                    "that differs from it only in decimal numbers",
                    request.key()[:12],
                    self.cache.path,
                )
        if response is None:
            return None
        return LLMReply.from_dict(response, latency_s=time.monotonic() - start, cached=True)

    def _miss_error(self, request: LLMRequest) -> ReplayMissError:
        held = ", ".join(self.cache.recorded_for()) or "nothing"
        return ReplayMissError(
            f"replay miss: request {request.key()} ({request.model}, {request.mode}, "
            f"max_tokens={request.max_tokens}, temperature={request.temperature:g}) is not in "
            f"{self.cache.path} ({len(self.cache)} exchanges, recorded for {held}): record it "
            f"first (spec 'record:{self.cache.path}') or pass the config it was recorded with"
        )


def _ends_mid_line(path: Path) -> bool:
    if not path.exists() or path.stat().st_size == 0:
        return False
    with path.open("rb") as f:
        f.seek(-1, 2)
        return f.read(1) != b"\n"
