"""Warm a completion server before the first instruction (issue 16): the planners' fixed prompt
parts are evaluated once at start-up, so the first instruction pays only its own tail.

A llama.cpp server keeps what it has processed (``llama_prefix_cache`` keeps several prompts'
prefixes at once); sending each fixed part with ``max_tokens=1`` fills that cache. Only live
completion endpoints are warmed: a replay file has nothing to warm, and a chat endpoint's
prompt caching is the provider's business.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from lang2policy.errors import LLMError, LLMResponseError
from lang2policy.llm.cache import CachingClient
from lang2policy.llm.client import LLMClient
from lang2policy.llm.exchange import LLM

log = logging.getLogger("lang2policy.llm")
Progress = Callable[[int, int, float], None]  # (prompts done, prompts in all, seconds so far)


@dataclass
class Warmth:
    """What warming did: prompts processed, seconds, and why it did nothing or stopped."""

    prompts: int = 0
    seconds: float = 0.0
    skipped: str = ""  # why nothing was sent (replay, chat endpoint)
    errors: list[str] = field(default_factory=list)
    server: str = ""  # the live server's health check: what it lists, or why it is unreachable
    reachable: bool | None = None  # None: no live server (a replay)

    def describe(self) -> str:
        health = f"; {self.server}" if self.server else ""
        if self.skipped:
            return f"LLM not warmed ({self.skipped}){health}"
        text = f"LLM warmed: {self.prompts} prompt prefixes processed in {self.seconds:.1f} s"
        return text + health + (f"; failed: {'; '.join(self.errors)}" if self.errors else "")


def live_client(llm: LLM) -> LLMClient | None:
    """The live client behind ``llm`` (any mode), or None (a replay)."""
    if isinstance(llm, CachingClient):
        llm = llm.live  # None when replaying
    return llm if isinstance(llm, LLMClient) else None


def check_server(client: LLMClient, warmth: Warmth) -> None:
    """The server's health check, recorded in ``warmth`` (never raised: the first instruction
    meets the same error with the planner's message; the status says it at start-up)."""
    url = client.config.base_url
    try:
        models = client.check_health()
    except LLMError as exc:
        warmth.server, warmth.reachable = f"unreachable: {exc}", False
        log.warning("%s", warmth.server)
        return
    listed = ", ".join(models[:5]) + (", ..." if len(models) > 5 else "")
    warmth.server, warmth.reachable = f"the LLM server at {url} answers (models: {listed})", True


def live_completion_client(llm: LLM) -> LLMClient | None:
    """The live completion-mode client behind ``llm``, or None (replay, chat, unknown)."""
    client = live_client(llm)
    return client if client is not None and client.config.mode == "completion" else None


def warm_up(llm: LLM, prompts: Sequence[str], on_progress: Progress | None = None) -> Warmth:
    """Send each distinct prompt of ``prompts`` to ``llm`` for one token, in order. An
    unreachable server is reported in the result, not raised: the planner then meets the
    same error, with its own message, on the first instruction. ``on_progress(done, total,
    seconds)`` hears of each prompt before it is sent and once at the end."""
    live = live_client(llm)
    if live is None:
        return Warmth(skipped="replay: nothing to warm")
    warmth = Warmth()
    check_server(live, warmth)
    client = live_completion_client(llm)
    if client is None:
        warmth.skipped = "chat endpoint: its prompt caching is the provider's"
        return warmth
    if not warmth.reachable:
        return warmth
    started = time.monotonic()
    distinct = list(dict.fromkeys(p for p in prompts if p))
    report = on_progress or (lambda _done, _total, _seconds: None)
    for prompt in distinct:
        report(warmth.prompts, len(distinct), time.monotonic() - started)
        try:
            client.complete(prompt, max_tokens=1, temperature=0.0)
        except LLMResponseError:
            pass  # cut off at one token: expected, the prompt is processed
        except LLMError as exc:
            warmth.errors.append(f"{type(exc).__name__}: {exc}")
            break
        warmth.prompts += 1
    warmth.seconds = time.monotonic() - started
    report(warmth.prompts, len(distinct), warmth.seconds)
    log.info("%s", warmth.describe())
    return warmth
