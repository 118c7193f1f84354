"""Token log-probabilities from llama-cpp-python's server without ``logits_all``.

llama-cpp-python answers ``logprobs`` only for a model loaded with ``logits_all=True``, which
keeps the logits of every prompt token: about 5x slower prompt evaluation and GBs of memory
for a 262k-token vocabulary (see ``LocalModelServer._command``). Scoring candidate programs
needs only the log-probability of each *generated* token, and the logits of the last
evaluated token are there anyway (the sampler reads them). ``install()`` patches
``llama_cpp.Llama`` in the server process so that a non-streaming completion asked for
``logprobs`` records, at each sampled token, ``log softmax(logits)[token]`` of the raw
(untempered) distribution, and reports them as ``choices[0].logprobs.token_logprobs``.
Without ``logprobs`` nothing changes and nothing is computed.
"""

from __future__ import annotations

from typing import Any


def install() -> None:
    """Patch ``llama_cpp.Llama.sample`` and ``create_completion`` (idempotent)."""
    import llama_cpp
    import numpy as np

    llama = llama_cpp.Llama
    if getattr(llama, "_lang2policy_logprobs", False):
        return
    original_sample, original_create = llama.sample, llama.create_completion

    def sample(self: Any, *args: Any, idx: int | None = None, **kwargs: Any) -> int:
        token = original_sample(self, *args, idx=idx, **kwargs)
        record = getattr(self, "_lang2policy_record", None)
        if record is not None:
            row = idx - self.n_tokens if idx is not None else -1
            logits = np.ctypeslib.as_array(self._ctx.get_logits_ith(row), shape=(self._n_vocab,))
            top = float(logits.max())
            log_total = top + float(np.log(np.exp(logits - top).sum()))
            record.append(float(logits[token]) - log_total)
        return token

    def create_completion(self: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("logprobs") is None or self._logits_all or kwargs.get("stream"):
            return original_create(self, *args, **kwargs)
        self._lang2policy_record = record = []
        try:
            completion = original_create(self, *args, **{**kwargs, "logprobs": None})
        finally:
            self._lang2policy_record = None
        # the server's response model wants lists in every field; only the values are used
        completion["choices"][0]["logprobs"] = {
            "tokens": [],
            "text_offset": [],
            "token_logprobs": record,
            "top_logprobs": [],
        }
        return completion

    llama.sample, llama.create_completion = sample, create_completion
    llama._lang2policy_logprobs = True
