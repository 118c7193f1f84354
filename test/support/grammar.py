"""Policy-code grammars run by llama.cpp's own grammar sampler on the local model's vocabulary
(the ``vocab`` fixture): where a grammar refuses a text (code grammar and VLA skill tests)."""

from __future__ import annotations

import ctypes
import math

PARSERS = ("parse_obj_name", "parse_position")


def _tokens(llama_cpp, vocab, text: str) -> list[int]:
    data = text.encode()
    buffer = (llama_cpp.llama_token * (len(data) + 8))()
    count = llama_cpp.llama_tokenize(vocab, data, len(data), buffer, len(buffer), False, False)
    return list(buffer[:count])


def rejected_at(vocab, grammar: str, text: str) -> str | None:
    """None when llama.cpp's grammar sampler accepts all of ``text`` and then the end; else
    the rest of the text from the first token it refuses (``"<end>"``: it wanted more)."""
    import llama_cpp

    sampler = llama_cpp.llama_sampler_init_grammar(vocab, grammar.encode(), b"root")
    assert sampler, "llama.cpp could not compile the grammar"
    eos, done = llama_cpp.llama_vocab_eos(vocab), 0
    try:
        for token in [*_tokens(llama_cpp, vocab, text), eos]:
            data = (llama_cpp.llama_token_data * 1)(llama_cpp.llama_token_data(token, 0.0, 0.0))
            array = llama_cpp.llama_token_data_array(data, 1, -1, False)
            llama_cpp.llama_sampler_apply(sampler, ctypes.byref(array))
            if math.isinf(data[0].logit):
                return text[done:] or "<end>"
            if token == eos:
                return None
            llama_cpp.llama_sampler_accept(sampler, token)
            piece = ctypes.create_string_buffer(64)
            size = llama_cpp.llama_token_to_piece(vocab, token, piece, 64, 0, False)
            done += len(piece.raw[:size].decode(errors="replace"))
    finally:
        llama_cpp.llama_sampler_free(sampler)
    return None
