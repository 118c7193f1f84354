"""The LLM layer: one client for any OpenAI-compatible endpoint, a local default model, and a
record/replay cache of exchanges.

    from lang2policy.llm import make_client
    llm = make_client("local")          # or "openai", "replay:FILE", "record:FILE", "cache:FILE"
    reply = llm.complete(prompt, stop=["\\n#"])
    reply.text, reply.latency_s, reply.cached

Errors are ``lang2policy.errors.LLMError`` subclasses; one log line per call goes to the
``lang2policy.llm`` logger. No ROS here.
"""

from lang2policy.llm.cache import CACHE_MODES, CachingClient, ExchangeCache
from lang2policy.llm.client import LLMClient
from lang2policy.llm.config import MODES, LLMConfig
from lang2policy.llm.exchange import LLM, LLMReply, LLMRequest, build_request
from lang2policy.llm.factory import SPECS, local_config, make_client, openai_config
from lang2policy.llm.local_server import (
    LOCAL_MODEL_ALIAS,
    LocalModelServer,
    get_local_server,
    local_model_path,
)

__all__ = [
    "CACHE_MODES",
    "LLM",
    "LOCAL_MODEL_ALIAS",
    "MODES",
    "SPECS",
    "CachingClient",
    "ExchangeCache",
    "LLMClient",
    "LLMConfig",
    "LLMReply",
    "LLMRequest",
    "LocalModelServer",
    "build_request",
    "get_local_server",
    "local_config",
    "local_model_path",
    "make_client",
    "openai_config",
]
