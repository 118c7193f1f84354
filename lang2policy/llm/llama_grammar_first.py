"""Grammar-constrained sampling in llama-cpp-python's server at the cost of free sampling.

llama-cpp-python puts a request's GBNF grammar into the sampler chain, so every token applies
the grammar to the whole vocabulary: with Gemma 3's 262k tokens and the code grammar of
``planning.code_grammar`` that is 0.1 to 0.5 s per token on 2 cores, several seconds for a
one-line program. llama.cpp's own ``common_sampler`` samples first and applies the grammar to
the whole vocabulary only when the grammar refuses the sampled token; ``install()`` does the
same in the server process (the launcher of ``local_server`` calls it): the chain samples
without the grammar, the grammar checks that one token, and only a refused token costs a full
pass, after which the best token the grammar allows is taken (the most likely one: at
temperature 0 exactly what the chain with the grammar would have chosen). Requests without a
grammar are not touched.
"""

from __future__ import annotations

import ctypes
import math
from typing import Any

# Tokens the grammar is tried on first after it refused the sampled one: the refused token's
# runners-up nearly always hold an allowed one, and 256 of Gemma 3's 262k tokens cost a
# thousandth of a full pass.
SHORTLIST = 256


def install() -> None:
    """Patch ``llama_cpp._internals.LlamaSampler`` (idempotent)."""
    import llama_cpp
    import numpy as np
    from llama_cpp import _internals

    sampler_class = _internals.LlamaSampler
    if getattr(sampler_class, "_lang2policy_grammar_first", False):
        return
    original_sample = sampler_class.sample

    def add_grammar(self: Any, model: Any, grammar: Any) -> None:
        handle = llama_cpp.llama_sampler_init_grammar(
            model.vocab, grammar._grammar.encode("utf-8"), grammar._root.encode("utf-8")
        )
        if not handle:
            raise ValueError("llama.cpp could not parse the grammar")
        self._lang2policy_grammar = handle
        self._lang2policy_n_vocab = llama_cpp.llama_vocab_n_tokens(model.vocab)
        self._exit_stack.callback(llama_cpp.llama_sampler_free, handle)

    def best_allowed(self: Any, ctx: Any, idx: int) -> int:
        n_vocab = self._lang2policy_n_vocab
        logits = np.ctypeslib.as_array(
            llama_cpp.llama_get_logits_ith(ctx.ctx, idx), shape=(n_vocab,)
        )
        grammar = self._lang2policy_grammar
        top = np.argpartition(-logits, SHORTLIST)[:SHORTLIST]
        token = _best_of(grammar, top, logits)
        return token if token is not None else _best_of(grammar, np.arange(n_vocab), logits)

    def sample(self: Any, ctx: Any, idx: int = -1) -> int:
        token = original_sample(self, ctx, idx)
        grammar = getattr(self, "_lang2policy_grammar", None)
        if grammar is None:
            return token
        if not _allowed(grammar, token):
            token = best_allowed(self, ctx, idx)
        llama_cpp.llama_sampler_accept(grammar, token)
        return token

    sampler_class.add_grammar = add_grammar
    sampler_class.sample = sample
    sampler_class._lang2policy_grammar_first = True


def _allowed(grammar: Any, token: int) -> bool:
    """Whether ``grammar`` (a llama.cpp grammar sampler) allows ``token`` next."""
    import llama_cpp

    one = (llama_cpp.llama_token_data * 1)(llama_cpp.llama_token_data(token, 0.0, 0.0))
    array = llama_cpp.llama_token_data_array(one, 1, -1, False)
    llama_cpp.llama_sampler_apply(grammar, ctypes.byref(array))
    return not math.isinf(one[0].logit)


def _best_of(grammar: Any, ids: Any, logits: Any) -> int | None:
    """The most likely of the token ``ids`` (by ``logits``) that ``grammar`` allows, None if
    it allows none of them."""
    import llama_cpp
    import numpy as np

    token_data = np.dtype([("id", np.intc), ("logit", np.single), ("p", np.single)], align=True)
    data = np.zeros(len(ids), dtype=token_data)
    data["id"], data["logit"] = ids, logits[ids]
    pointer = data.ctypes.data_as(ctypes.POINTER(llama_cpp.llama_token_data))
    array = llama_cpp.llama_token_data_array(pointer, len(ids), -1, False)
    llama_cpp.llama_sampler_apply(grammar, ctypes.byref(array))
    best = int(np.argmax(data["logit"]))
    return None if math.isinf(data["logit"][best]) else int(data["id"][best])
