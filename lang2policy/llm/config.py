"""LLMConfig: which OpenAI-compatible endpoint and model to use, and how to call it.

The config never holds an API key, only the *name* of the environment variable that does, so
configs can be logged, stored in YAML (``lang2policy.config.load_dataclass`` builds one) and
recorded next to benchmark results without leaking secrets.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from lang2policy.errors import ConfigError

MODES = ("chat", "completion")


@dataclass(frozen=True)
class LLMConfig:
    """One endpoint + model and the default call parameters.

    ``mode`` picks the API: ``"chat"`` (/v1/chat/completions, for instruction-tuned models) or
    ``"completion"`` (/v1/completions, raw text continuation: what a base model such as Gemma 3
    270M needs for few-shot prompts). ``api_key_env`` is None for servers that need no key.
    Retries (``max_retries``, waits of ``backoff_s`` * 2**attempt) cover connection errors,
    5xx and rate limits only; a timeout is not retried.
    """

    model: str
    base_url: str
    api_key_env: str | None = "OPENAI_API_KEY"
    mode: str = "chat"
    timeout_s: float = 60.0
    max_retries: int = 2
    backoff_s: float = 0.5
    temperature: float = 0.0
    max_tokens: int = 256
    stop: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.model:
            raise ConfigError("LLMConfig.model is empty: name the model the server serves")
        if not self.base_url.startswith(("http://", "https://")):
            raise ConfigError(
                f"LLMConfig.base_url {self.base_url!r} must start with http:// or https:// "
                "(e.g. http://127.0.0.1:8080/v1)"
            )
        if self.mode not in MODES:
            raise ConfigError(f"LLMConfig.mode {self.mode!r} is not one of {list(MODES)}")
        _check_range("timeout_s", self.timeout_s, low=0.0, strict=True)
        _check_range("max_retries", self.max_retries, low=0)
        _check_range("backoff_s", self.backoff_s, low=0.0)
        _check_range("temperature", self.temperature, low=0.0)
        _check_range("max_tokens", self.max_tokens, low=1)
        if isinstance(self.stop, str) or not all(isinstance(s, str) and s for s in self.stop):
            raise ConfigError(f"LLMConfig.stop must be a tuple of non-empty strings: {self.stop!r}")

    def replace(self, **changes: object) -> LLMConfig:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)


def _check_range(name: str, value: float, *, low: float, strict: bool = False) -> None:
    bad = value <= low if strict else value < low
    if bad:
        relation = ">" if strict else ">="
        raise ConfigError(f"LLMConfig.{name} = {value!r}; it must be {relation} {low}")
