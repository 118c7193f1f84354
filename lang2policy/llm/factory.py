"""``make_client(spec)``: an LLM from a one-word choice, as the ``--llm`` option gives it.

Specs: ``local`` (the bundled Gemma 3 270M on a local llama.cpp server), ``openai`` (any
OpenAI-compatible endpoint from OPENAI_BASE_URL / OPENAI_MODEL / OPENAI_API_KEY),
``replay:FILE`` (answers only from a recorded file), ``record:FILE`` (the local model,
every exchange appended to FILE) and ``cache:FILE`` (the local model behind FILE: recorded
answers are reused, new ones recorded).

Worker processes share one local server: the parent starts it (``shared_server_url(spec)``)
and each worker makes its client with ``make_client(spec, server_url=URL)``, which reaches
that server instead of starting one of its own.
"""

from __future__ import annotations

import os
from pathlib import Path

from lang2policy.errors import ConfigError
from lang2policy.llm.cache import CachingClient, ExchangeCache
from lang2policy.llm.client import LLMClient
from lang2policy.llm.config import LLMConfig
from lang2policy.llm.local_server import LOCAL_MODEL_ALIAS, get_local_server

SPECS = ("local", "openai", "replay:FILE", "record:FILE", "cache:FILE")
_FILE_KINDS = ("replay", "record", "cache")
OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"
OPENAI_DEFAULT_MODEL = "gpt-4o-mini"
# Where a replay client claims to be: never contacted, and not part of a request's key.
_UNUSED_URL = "http://127.0.0.1:8080/v1"


def local_config(base_url: str = _UNUSED_URL) -> LLMConfig:
    """Gemma 3 270M is a base model: few-shot completion at temperature 0 is what works."""
    return LLMConfig(
        model=LOCAL_MODEL_ALIAS,
        base_url=base_url,
        api_key_env=None,
        mode="completion",
        timeout_s=120.0,
        max_retries=1,
        temperature=0.0,
        max_tokens=256,
    )


def openai_config() -> LLMConfig:
    """Chat mode against OPENAI_BASE_URL (default OpenAI) with OPENAI_MODEL; key: OPENAI_API_KEY."""
    return LLMConfig(
        model=os.environ.get("OPENAI_MODEL") or OPENAI_DEFAULT_MODEL,
        base_url=os.environ.get("OPENAI_BASE_URL") or OPENAI_DEFAULT_BASE_URL,
        api_key_env="OPENAI_API_KEY",
        mode="chat",
    )


def make_client(
    spec: str, *, config: LLMConfig | None = None, server_url: str | None = None
) -> LLMClient | CachingClient:
    """Build the client that ``spec`` names (see the module docstring).

    ``config`` replaces the spec's default config; for the local server its ``base_url`` is
    set to the server's. A replay client uses the local config unless given the one the file
    was recorded with (the model, mode and call parameters are part of each request's key).
    ``server_url``: the local server already runs there (started by another process), so
    none is started here.
    """
    kind, _, path = spec.partition(":")
    if kind == "local" and not path:
        return _local_client(config, server_url)
    if kind == "openai" and not path:
        return LLMClient(config or openai_config())
    if kind in _FILE_KINDS and path:
        return _cached_client(kind, Path(path), config, server_url)
    raise ConfigError(f"unknown LLM spec {spec!r}; valid: {', '.join(SPECS)}")


def shared_server_url(spec: str) -> str | None:
    """For worker processes that plan with ``spec``: the local server's URL, the server
    started here if ``spec`` runs the local model (``local``, ``record:``, ``cache:``), so all
    workers share one; None for a spec without it (``openai``, ``replay:``). A spec that names
    no client, or a replay file that is not there, is refused here, before any worker starts."""
    kind, _, path = spec.partition(":")
    if not ((kind in ("local", "openai") and not path) or (kind in _FILE_KINDS and path)):
        raise ConfigError(f"unknown LLM spec {spec!r}; valid: {', '.join(SPECS)}")
    if kind == "replay" and not Path(path).is_file():
        raise ConfigError(f"replay file not found: {path} (record one with 'record:{path}')")
    if kind in ("local", "record", "cache"):
        return get_local_server().base_url
    return None


def _local_client(config: LLMConfig | None, server_url: str | None = None) -> LLMClient:
    url = server_url or get_local_server().base_url
    return LLMClient((config or local_config()).replace(base_url=url))


def _cached_client(
    kind: str, path: Path, config: LLMConfig | None, server_url: str | None = None
) -> CachingClient:
    if kind == "replay":
        if not path.is_file():
            raise ConfigError(f"replay file not found: {path} (record one with 'record:{path}')")
        return CachingClient(ExchangeCache(path), "replay", config=config or local_config())
    live = _local_client(config, server_url)
    mode = "record" if kind == "record" else "read-through"
    return CachingClient(ExchangeCache(path), mode, config=live.config, live=live)
