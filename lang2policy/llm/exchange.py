"""What goes to an LLM and what comes back: ``LLMRequest``, ``LLMReply``, the ``LLM`` protocol.

A request is fully resolved (config defaults filled in) before it is sent, so the same request
always has the same key: the SHA-256 of its canonical JSON. The record/replay cache indexes
exchanges by that key.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypedDict, Unpack

from lang2policy.errors import LLMRequestError
from lang2policy.llm.config import LLMConfig

Message = dict[str, str]
PromptOrMessages = str | Sequence[Message]


@dataclass(frozen=True)
class LLMRequest:
    """One call, resolved: exactly one of ``prompt`` (completion) or ``messages`` (chat)."""

    model: str
    mode: str
    prompt: str | None
    messages: tuple[Message, ...] | None
    stop: tuple[str, ...]
    max_tokens: int
    temperature: float
    # Constrained decoding (optional; part of the key only when set, so older records match):
    # a GBNF grammar (llama.cpp servers) or an OpenAI ``response_format`` (e.g. a JSON schema).
    grammar: str | None = None
    response_format: Mapping[str, Any] | None = None
    # Also part of the key only when set: ``logprobs`` asks for the answer's token
    # log-probabilities (scoring candidate programs), ``seed`` fixes a sampled answer.
    logprobs: int | None = None
    seed: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able form (also what the cache stores; it holds no secrets)."""
        body: dict[str, Any] = {"model": self.model, "mode": self.mode}
        if self.mode == "chat":
            body["messages"] = [dict(m) for m in self.messages or ()]
        else:
            body["prompt"] = self.prompt
        body.update(stop=list(self.stop), max_tokens=self.max_tokens, temperature=self.temperature)
        if self.grammar is not None:
            body["grammar"] = self.grammar
        if self.response_format is not None:
            body["response_format"] = dict(self.response_format)
        for name in ("logprobs", "seed"):
            if getattr(self, name) is not None:
                body[name] = getattr(self, name)
        return body

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LLMRequest:
        messages = data.get("messages")
        return cls(
            model=data["model"],
            mode=data["mode"],
            prompt=data.get("prompt"),
            messages=tuple(dict(m) for m in messages) if messages is not None else None,
            stop=tuple(data.get("stop") or ()),
            max_tokens=int(data["max_tokens"]),
            temperature=float(data["temperature"]),
            grammar=data.get("grammar"),
            response_format=data.get("response_format"),
            logprobs=data.get("logprobs"),
            seed=data.get("seed"),
        )

    def key(self) -> str:
        """SHA-256 hex digest of the canonical JSON of the request."""
        return _digest(self.to_dict())

    def number_blind_key(self) -> str:
        """The key of this request with every decimal number in its text replaced by ``#``.

        Two requests that differ only in measured values (a camera's estimate of where an
        object was, printed into the prompt to the centimetre) share it; replay uses it to
        answer such a request when exactly one recorded exchange matches (``ExchangeCache``).
        """
        body = self.to_dict()
        if body.get("prompt") is not None:
            body["prompt"] = _DECIMAL.sub("#", body["prompt"])
        for message in body.get("messages", ()):
            message["content"] = _DECIMAL.sub("#", str(message.get("content", "")))
        return _digest(body)


_DECIMAL = re.compile(r"-?\d+\.\d+")


def _digest(body: dict[str, Any]) -> str:
    """SHA-256 hex digest of ``body``'s canonical JSON."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class LLMReply:
    """The answer. Token counts are None when the server does not report usage."""

    text: str
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    latency_s: float
    model: str
    cached: bool = False
    # The answer's log-likelihood (sum of its tokens' natural-log probabilities) and how many
    # tokens it sums, when the request asked for ``logprobs`` and the server reported them.
    logprob: float | None = None
    logprob_tokens: int | None = None

    def to_dict(self) -> dict[str, Any]:
        likelihood = {"logprob": self.logprob, "logprob_tokens": self.logprob_tokens}
        return {
            "text": self.text,
            "finish_reason": self.finish_reason,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "latency_s": round(self.latency_s, 4),
            "model": self.model,
            **(likelihood if self.logprob is not None else {}),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, latency_s: float, cached: bool) -> LLMReply:
        return cls(
            text=data["text"],
            finish_reason=data.get("finish_reason"),
            prompt_tokens=data.get("prompt_tokens"),
            completion_tokens=data.get("completion_tokens"),
            latency_s=latency_s,
            model=data.get("model", ""),
            cached=cached,
            logprob=data.get("logprob"),
            logprob_tokens=data.get("logprob_tokens"),
        )


class CallOptions(TypedDict, total=False):
    """What one call may set over the config (absent or None: the config's value): ``stop``,
    ``max_tokens`` and ``temperature``; ``grammar`` (GBNF) and ``response_format`` constrain
    the answer on servers that support them; ``logprobs`` (how many top alternatives per
    token; 1 is enough) asks for the answer's log-likelihood (``LLMReply.logprob``) and
    ``seed`` fixes a sampled (temperature > 0) answer, where the server honours them."""

    stop: Sequence[str] | str | None
    max_tokens: int | None
    temperature: float | None
    grammar: str | None
    response_format: Mapping[str, Any] | None
    logprobs: int | None
    seed: int | None


class LLM(Protocol):
    """What a planner needs: ``LLMClient`` and ``CachingClient`` both are one."""

    config: LLMConfig

    def complete(
        self, prompt_or_messages: PromptOrMessages, **options: Unpack[CallOptions]
    ) -> LLMReply: ...


def build_request(
    config: LLMConfig, prompt_or_messages: PromptOrMessages, **options: Unpack[CallOptions]
) -> LLMRequest:
    """Resolve one call against ``config``: per-call values win over the config's defaults.

    In chat mode a plain string becomes one user message; completion mode needs a string.
    ``grammar`` (GBNF) and ``response_format`` constrain the answer on servers that support
    them (llama.cpp: both; OpenAI: ``response_format`` in chat mode).
    """
    known = list(CallOptions.__annotations__)
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise TypeError(f"unknown LLM call options {unknown}; known: {known}")
    stop, max_tokens = options.get("stop"), options.get("max_tokens")
    temperature = options.get("temperature")
    if isinstance(stop, str):
        stop = [stop]
    prompt, messages = _split_input(config.mode, prompt_or_messages)
    return LLMRequest(
        model=config.model,
        mode=config.mode,
        prompt=prompt,
        messages=messages,
        stop=tuple(config.stop if stop is None else stop),
        max_tokens=int(config.max_tokens if max_tokens is None else max_tokens),
        temperature=float(config.temperature if temperature is None else temperature),
        grammar=options.get("grammar"),
        response_format=options.get("response_format"),
        logprobs=options.get("logprobs"),
        seed=options.get("seed"),
    )


def _split_input(
    mode: str, prompt_or_messages: PromptOrMessages
) -> tuple[str | None, tuple[Message, ...] | None]:
    if isinstance(prompt_or_messages, str):
        if mode == "chat":
            return None, ({"role": "user", "content": prompt_or_messages},)
        return prompt_or_messages, None
    if mode == "completion":
        raise LLMRequestError(
            "completion mode takes a prompt string, not a list of chat messages; "
            "use an LLMConfig with mode='chat' for messages (nothing was sent)"
        )
    messages = tuple(dict(m) for m in prompt_or_messages)
    for m in messages:
        if set(m) != {"role", "content"} or not all(isinstance(v, str) for v in m.values()):
            raise LLMRequestError(
                f"a chat message must be {{'role': str, 'content': str}}, got {m!r} "
                "(nothing was sent)"
            )
    return None, messages
