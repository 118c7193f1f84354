"""LLMClient: one client for any OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, llama.cpp).

Built on the ``openai`` package with its own retries switched off: this module retries only
connection errors, 5xx and rate limits (exponential backoff), turns every failure into a
``lang2policy.errors.LLMError`` that says what happened and what to do, rejects empty and
truncated answers, and logs one line per call on the ``lang2policy.llm`` logger.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import Any, Unpack

import openai

from lang2policy.errors import (
    LLMAuthError,
    LLMRequestError,
    LLMResponseError,
    LLMTimeoutError,
    LLMUnavailableError,
)
from lang2policy.llm.config import LLMConfig
from lang2policy.llm.exchange import (
    CallOptions,
    LLMReply,
    LLMRequest,
    PromptOrMessages,
    build_request,
)

log = logging.getLogger("lang2policy.llm")

# Sent when the config names no key variable: the openai package insists on some key, and
# local servers (llama.cpp, Ollama, vLLM) ignore it.
_NO_KEY = "no-key-required"
HEALTH_TIMEOUT_S = 5.0  # a server on another host that cannot list its models in 5 s is down
MAX_LISTED_MODELS = 20


class LLMClient:
    """Calls one OpenAI-compatible endpoint as configured by an ``LLMConfig``."""

    def __init__(self, config: LLMConfig) -> None:
        self.config = config
        self._openai = openai.OpenAI(
            api_key=_read_api_key(config),
            base_url=config.base_url,
            timeout=config.timeout_s,
            max_retries=0,
        )

    def complete(
        self, prompt_or_messages: PromptOrMessages, **options: Unpack[CallOptions]
    ) -> LLMReply:
        """Send one prompt (completion mode) or message list (chat mode) and return the answer.

        ``stop``, ``max_tokens`` and ``temperature`` override the config for this call.
        ``grammar`` (a GBNF grammar, sent as llama.cpp's ``grammar`` field) and
        ``response_format`` (e.g. ``{"type": "json_object", "schema": {...}}``) constrain
        the answer; servers that do not know them may reject the request or ignore them
        (llama.cpp honours ``grammar`` in both modes, ``response_format`` in chat mode only).
        Raises an ``LLMError`` subclass on failure, ``LLMResponseError`` for an empty or
        truncated answer.
        """
        return answer(self.config, prompt_or_messages, options, self.send)

    def send(self, request: LLMRequest) -> LLMReply:
        """The live call, with retries; no log line, no answer checks (``complete`` adds them)."""
        attempts = self.config.max_retries + 1
        start = time.monotonic()
        for attempt in range(attempts):
            try:
                raw = self._create(request)
            except openai.APITimeoutError as exc:
                raise self._timeout_error() from exc
            except (
                openai.APIConnectionError,
                openai.RateLimitError,
                openai.InternalServerError,
            ) as exc:
                if attempt + 1 == attempts:
                    raise self._unavailable_error(exc, attempts) from exc
                delay = self.config.backoff_s * 2**attempt
                log.warning(
                    "%s: %s; retry %d/%d in %.2f s",
                    self.config.base_url,
                    _describe(exc),
                    attempt + 1,
                    attempts - 1,
                    delay,
                )
                time.sleep(delay)
            except openai.APIStatusError as exc:
                raise self._status_error(exc) from exc
            except openai.APIError as exc:
                raise LLMResponseError(
                    f"the LLM server at {self.config.base_url} sent an answer that is not a "
                    f"valid {request.mode} response: {exc}"
                ) from exc
            else:
                return _parse(raw, request, time.monotonic() - start)
        raise AssertionError("unreachable: the retry loop returns or raises")

    def check_health(self, timeout_s: float = HEALTH_TIMEOUT_S) -> list[str]:
        """The model ids the server lists (``GET {base_url}/models``, the OpenAI API's health
        probe; no tokens spent), within ``timeout_s`` and without retries. Raises the
        ``LLMError`` that a completion would (unreachable, timeout, bad key), naming the URL."""
        try:
            listing = self._openai.with_options(timeout=timeout_s, max_retries=0).models.list()
            return [str(model.id) for model in listing.data][:MAX_LISTED_MODELS]
        except openai.APITimeoutError as exc:
            raise LLMTimeoutError(
                f"the LLM server at {self.config.base_url} did not list its models within "
                f"{timeout_s:g} s"
            ) from exc
        except openai.APIConnectionError as exc:
            raise self._unavailable_error(exc, 1) from exc
        except openai.APIStatusError as exc:
            raise self._status_error(exc) from exc

    def close(self) -> None:
        self._openai.close()

    def __enter__(self) -> LLMClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _create(self, request: LLMRequest) -> Any:
        kwargs: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
        }
        if request.stop:
            kwargs["stop"] = list(request.stop)
        if request.seed is not None:
            kwargs["seed"] = request.seed
        if request.logprobs is not None:
            if request.mode == "chat":  # chat: a flag plus how many alternatives per token
                kwargs.update(logprobs=True, top_logprobs=request.logprobs)
            else:
                kwargs["logprobs"] = request.logprobs
        extra: dict[str, Any] = {}
        if request.grammar is not None:
            extra["grammar"] = request.grammar
        if request.response_format is not None:
            if request.mode == "chat":
                kwargs["response_format"] = dict(request.response_format)
            else:  # not a completions parameter: sent in the body (llama.cpp ignores it there)
                extra["response_format"] = dict(request.response_format)
        if extra:
            kwargs["extra_body"] = extra
        if request.mode == "chat":
            return self._openai.chat.completions.create(
                messages=[dict(m) for m in request.messages or ()], **kwargs
            )
        return self._openai.completions.create(prompt=request.prompt, **kwargs)

    def _timeout_error(self) -> LLMTimeoutError:
        return LLMTimeoutError(
            f"no answer from the LLM server at {self.config.base_url} within "
            f"{self.config.timeout_s:g} s (model {self.config.model!r}): raise "
            "LLMConfig.timeout_s, shorten the prompt or lower max_tokens"
        )

    def _unavailable_error(self, exc: Exception, attempts: int) -> LLMUnavailableError:
        url = self.config.base_url
        tries = f"{attempts} attempt{'s' if attempts > 1 else ''}"
        if isinstance(exc, openai.RateLimitError):
            hint = "wait, send fewer requests, or raise LLMConfig.max_retries / backoff_s"
            return LLMUnavailableError(f"rate-limited by {url} (HTTP 429) after {tries}: {hint}")
        if isinstance(exc, openai.APIStatusError):
            return LLMUnavailableError(
                f"the LLM server at {url} kept failing ({_describe(exc)}) after {tries}: "
                "check the server's log, or retry later"
            )
        return LLMUnavailableError(
            f"cannot reach the LLM server at {url} ({_describe(exc)}) after {tries}: start the "
            "server or fix the URL (LLMConfig.base_url, OPENAI_BASE_URL), or use the local "
            "model (spec 'local')"
        )

    def _status_error(self, exc: openai.APIStatusError) -> Exception:
        url, env = self.config.base_url, self.config.api_key_env
        if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
            # The server's own message is left out: some echo part of the key.
            if env is None:
                return LLMAuthError(
                    f"the LLM server at {url} wants an API key (HTTP {exc.status_code}) but "
                    "LLMConfig.api_key_env is None: set it to the environment variable that "
                    "holds the key"
                )
            return LLMAuthError(
                f"the LLM server at {url} rejected the API key from the environment variable "
                f"{env} (HTTP {exc.status_code}): set {env} to a valid key for this server"
            )
        if isinstance(exc, openai.NotFoundError):
            return LLMRequestError(
                f"the LLM server at {url} answered 404 for model {self.config.model!r} "
                f"({exc.message}): check the model name (LLMConfig.model, OPENAI_MODEL) and "
                f"that the server offers the {self.config.mode} API"
            )
        return LLMRequestError(
            f"the LLM server at {url} rejected the request ({_describe(exc)}); nothing to retry"
        )


def answer(
    config: LLMConfig,
    prompt_or_messages: PromptOrMessages,
    options: CallOptions,
    send: Callable[[LLMRequest], LLMReply],
) -> LLMReply:
    """One ``complete`` call of any client: the request resolved against ``config``, the reply
    that ``send`` gets for it, logged in one line and checked (empty or truncated answers)."""
    request = build_request(config, prompt_or_messages, **options)
    reply = send(request)
    log_reply(reply, request)
    check_reply(reply, request)
    return reply


def check_reply(reply: LLMReply, request: LLMRequest) -> None:
    """Raise ``LLMResponseError`` for a truncated (finish_reason 'length') or empty answer."""
    if reply.finish_reason == "length":
        raise LLMResponseError(
            f"the answer from {request.model!r} was cut off at max_tokens={request.max_tokens} "
            "(finish_reason 'length'): raise max_tokens or add a stop sequence that ends the "
            f"answer; it began {reply.text[:80]!r}",
            reply,
        )
    if not reply.text.strip():
        raise LLMResponseError(
            f"the model {request.model!r} returned an empty answer (finish_reason "
            f"{reply.finish_reason!r}): check the end of the prompt and the stop sequences "
            f"{list(request.stop)} (one that matches at the very start empties the answer)",
            reply,
        )


def log_reply(reply: LLMReply, request: LLMRequest) -> None:
    """The one log line per call."""
    log.info(
        "model=%s mode=%s latency=%.3fs prompt_tokens=%s completion_tokens=%s finish=%s cached=%s",
        request.model,
        request.mode,
        reply.latency_s,
        reply.prompt_tokens,
        reply.completion_tokens,
        reply.finish_reason,
        reply.cached,
    )


def _read_api_key(config: LLMConfig) -> str:
    if config.api_key_env is None:
        return _NO_KEY
    key = os.environ.get(config.api_key_env, "")
    if not key:
        raise LLMAuthError(
            f"the environment variable {config.api_key_env}, which should hold the API key for "
            f"{config.base_url}, is not set: export {config.api_key_env}=<your key>, or use the "
            "local model (spec 'local')"
        )
    return key


def _parse(raw: Any, request: LLMRequest, latency_s: float) -> LLMReply:
    if not getattr(raw, "choices", None):
        raise LLMResponseError(f"the LLM server answered with no choices for {request.model!r}")
    choice = raw.choices[0]
    text = choice.message.content if request.mode == "chat" else choice.text
    usage = getattr(raw, "usage", None)
    token_logprobs = _token_logprobs(choice, request.mode)
    return LLMReply(
        text=text or "",
        finish_reason=choice.finish_reason,
        prompt_tokens=getattr(usage, "prompt_tokens", None),
        completion_tokens=getattr(usage, "completion_tokens", None),
        latency_s=latency_s,
        model=getattr(raw, "model", None) or request.model,
        logprob=sum(token_logprobs) if token_logprobs else None,
        logprob_tokens=len(token_logprobs) if token_logprobs else None,
    )


def _token_logprobs(choice: Any, mode: str) -> list[float]:
    """The answer's token log-probabilities as the server reported them (none: ``[]``):
    completion mode ``logprobs.token_logprobs``, chat mode ``logprobs.content[i].logprob``."""
    logprobs = getattr(choice, "logprobs", None)
    if logprobs is None:
        return []
    if mode == "chat":
        values = [getattr(token, "logprob", None) for token in logprobs.content or ()]
    else:
        values = list(getattr(logprobs, "token_logprobs", None) or ())
    return [float(v) for v in values if isinstance(v, int | float)]


def _describe(exc: Exception) -> str:
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}: {exc.message}"
    cause = exc.__cause__
    return f"{exc}{f' {cause}' if cause else ''}".strip()
