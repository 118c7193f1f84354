"""Fixtures of the planning tests."""

import pytest


@pytest.fixture(scope="module")
def prompts():
    """The packaged prompt set."""
    from lang2policy.planning import PromptSet

    return PromptSet.load()


@pytest.fixture(scope="module")
def vocab():
    llama_cpp = pytest.importorskip("llama_cpp")
    try:
        from lang2policy.llm.local_server import local_model_path

        path = local_model_path()
    except Exception as exc:  # no packaged model: nothing to run the grammar on
        pytest.skip(f"no local model for its vocabulary: {exc}")
    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    model = llama_cpp.llama_model_load_from_file(str(path).encode(), params)
    assert model, "the local model's vocabulary did not load"
    yield llama_cpp.llama_model_get_vocab(model)
    llama_cpp.llama_model_free(model)
