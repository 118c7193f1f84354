"""Several processed prompt prefixes kept at once in llama-cpp-python's server (issue 16).

The server keeps one context: a request reuses the longest prefix it shares with the *previous*
request and evaluates the rest. The planners alternate between prompts with different fixed
parts (the Code-as-Policies prompt, its function-writing prompt, the reward planner's
descriptor and coder prompts, each 1-2k tokens), so on two cores every switch re-evaluated a
whole prompt: 10-20 s each, and a reward plan (descriptor, then coder) paid it twice.

llama-cpp-python can keep earlier contexts in a cache (``--cache true``): after each
completion it saves the context's state under its tokens, and a request whose prompt shares a
longer prefix with a saved state than with the live context loads that state first. As shipped
that state carries the logits of the last ``n_batch`` evaluated positions (512 x Gemma 3's 262k
vocabulary: 512 MB per entry, not even counted against the cache's capacity). ``install()``
saves only the last row, which is all a restored state needs: llama-cpp-python re-evaluates the
last prompt token after a restore before it samples (``Llama._requires_eval``). An entry is then
the KV cache of its tokens (about 18 kB per token for Gemma 3 270M) and the cache's capacity
means what it says.
"""

from __future__ import annotations

import ctypes
from typing import Any

# What the server's RAM cache may hold (``--cache_size``): about 15 prompts of 2k tokens.
CACHE_BYTES = 512 << 20


def install() -> None:
    """Patch ``llama_cpp.Llama.save_state`` (idempotent); see the module docstring."""
    import llama_cpp
    from llama_cpp.llama import Llama, LlamaState

    if getattr(Llama, "_lang2policy_small_state", False):
        return

    def save_state(self: Any) -> LlamaState:
        size = llama_cpp.llama_state_get_size(self._ctx.ctx)
        buffer = (ctypes.c_uint8 * int(size))()
        written = int(llama_cpp.llama_state_get_data(self._ctx.ctx, buffer, size))
        if written > int(size):
            raise RuntimeError("llama_state_get_data wrote more than llama_state_get_size")
        scores = self._scores
        return LlamaState(
            scores=scores[-1:].copy() if len(scores) else scores.copy(),
            input_ids=self.input_ids.copy(),
            n_tokens=self.n_tokens,
            llama_state=ctypes.string_at(buffer, written),
            llama_state_size=written,
            seed=self._seed,
        )

    Llama.save_state = save_state
    Llama._lang2policy_small_state = True


def server_options() -> dict[str, object]:
    """The llama_cpp.server options that turn the prefix cache on."""
    return {"cache": True, "cache_type": "ram", "cache_size": CACHE_BYTES}
