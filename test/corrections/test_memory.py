"""The correction memory on disk, with the real MiniLM model: log, recall, cache, restarts."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest

from lang2policy.corrections import (
    CorrectionError,
    CorrectionMemory,
    Embedder,
    apply_recalled,
    classify,
    situation_for_call,
    situation_for_spec,
)
from lang2policy.corrections.memory import objects_named
from lang2policy.rewards.spec import validate_spec

OBJECTS = ["red block", "blue block", "green bowl"]
HOVER = validate_spec(
    {
        "task": "hover over the red block",
        "terms": [
            {
                "id": "above",
                "term": "tool_above",
                "params": {"point": [0.2, 0.05, 0.0], "height": 0.1},
            }
        ],
    },
    OBJECTS,
).spec


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    model = Embedder()
    model.load()
    return model


@pytest.fixture
def memory(tmp_path, embedder) -> CorrectionMemory:
    store = CorrectionMemory(tmp_path / "corrections.jsonl", embedder=embedder)
    store.remember(
        "hover over the red block",
        classify("a bit to the left", OBJECTS),
        situation_for_spec(HOVER, OBJECTS, sim_time=3.0),
    )
    store.remember(
        "lift the red block",
        classify("no, the blue one", OBJECTS, ["red block"]),
        situation_for_call("pick", {"obj": "red block", "speed": 0.15}, OBJECTS),
    )
    store.remember("move the gripper to the left side", classify("slower", OBJECTS))
    store.remember("hover over the red block", classify("stop", OBJECTS))
    return store


def test_records_are_json_lines_that_survive_a_restart(memory, embedder):
    lines = memory.path.read_text().splitlines()
    assert len(lines) == 4
    first = json.loads(lines[0])
    assert first["kind"] == "offset" and first["edit"] == {"offset": [0.0, 0.02, 0.0]}
    assert first["situation"]["spec"]["terms"][0]["id"] == "above"
    assert first["situation"]["sim_time"] == 3.0
    assert json.loads(lines[1])["situation"]["args"] == {"obj": "red block", "speed": 0.15}
    again = CorrectionMemory(memory.path, embedder=embedder)
    assert again.records() == memory.records()
    assert [r.correction.kind for r in again.records()] == ["offset", "target", "speed", "stop"]


def test_similar_phrasing_is_recalled_and_unrelated_is_not(memory):
    found = memory.recall("hover above the red block")
    assert found and found[0].record.instruction == "hover over the red block"
    assert found[0].score > 0.9
    assert [r.score for r in found] == sorted((r.score for r in found), reverse=True)
    lifted = memory.recall("pick up the red block and lift it")
    assert lifted[0].correction.target == "blue block"
    assert memory.recall("push the green bowl to the far corner") == []
    assert memory.recall("what time is it") == []
    anything = memory.recall("what time is it", threshold=0.0)
    # in scope: only the record whose instruction names no object either (the gripper's)
    assert [r.record.instruction for r in anything] == ["move the gripper to the left side"]
    assert all(-1.0 <= r.score < 0.5 for r in anything)


def test_edits_for_gives_the_remembered_edits_in_the_order_they_were_made(memory):
    memory.remember("hover above the red block", classify("a little further away", OBJECTS))
    edits = memory.edits_for("hover above the red block")
    assert [e.record.text for e in edits] == ["a bit to the left", "a little further away"]
    applied, used = apply_recalled(HOVER, edits, OBJECTS)
    assert len(used) == 2
    assert applied.spec.term("above").params["point"] == pytest.approx((0.215, 0.07, 0.0))


def test_an_edit_that_does_not_fit_the_new_task_is_skipped_with_a_note(memory):
    edits = memory.edits_for("lift the red block")
    applied, used = apply_recalled(HOVER, edits, OBJECTS)  # no red block object to swap
    assert used == [] and applied.spec == HOVER
    assert any("does not fit this task" in note for note in applied.notes)


def test_embeddings_are_cached_on_disk_and_recomputed_when_stale(memory, caplog):
    memory.recall("hover above the red block")
    assert memory.cache_path.exists()
    counting = Embedder()  # shares the loaded model; counts only its own encodings
    restarted = CorrectionMemory(memory.path, embedder=counting)
    restarted.recall("hover above the red block")
    assert counting.texts == 1  # only the query: stored instructions came from the cache
    memory.cache_path.write_bytes(b"not an npz file")
    with caplog.at_level(logging.WARNING, logger="lang2policy.corrections"):
        broken = CorrectionMemory(memory.path, embedder=counting)
        assert broken.recall("hover above the red block")[0].score > 0.9
    assert "unreadable embedding cache" in caplog.text
    assert counting.texts == 1 + 1 + 3  # query, query, three distinct stored instructions
    with np.load(memory.cache_path) as data:
        assert data["vectors"].shape == (3, 384)


def test_corrupt_lines_are_skipped_with_a_warning(memory, embedder, caplog):
    with memory.path.open("a") as out:
        out.write('{"kind": "offset"}\n')  # valid JSON, not a record
        out.write("garbage\n")
        out.write('{"id": "cut off by a cra')  # no newline: a crash mid-write
    memory.remember("hover over the red block", classify("a bit lower", OBJECTS))
    with caplog.at_level(logging.WARNING, logger="lang2policy.corrections"):
        reread = CorrectionMemory(memory.path, embedder=embedder)
        records = reread.records()
    assert reread.skipped == 3
    assert caplog.text.count("skipped a corrupt correction record") == 3
    assert [r.text for r in records][-1] == "a bit lower"
    assert len(records) == 5


def test_embedding_latency_is_measured(memory, embedder):
    memory.recall("hover above the red block")
    stats = embedder.stats()
    # The model is loaded once per process: another test may have paid the load already.
    assert stats["model_load_s"] >= 0 and stats["encode_calls"] > 0
    assert 0 < stats["encode_ms_mean"] < 2000
    assert 0 < memory.last_recall_ms < 5000


def test_bad_use_is_rejected_with_a_reason(tmp_path, memory):
    with pytest.raises(CorrectionError, match="directory"):
        CorrectionMemory(tmp_path)
    with pytest.raises(CorrectionError, match="non-empty text"):
        memory.remember("  ", classify("slower", OBJECTS))
    with pytest.raises(CorrectionError, match="JSON data"):
        memory.remember("lift", classify("slower", OBJECTS), {"when": object()})
    with pytest.raises(CorrectionError, match="threshold"):
        memory.recall("lift", threshold=1.5)
    assert CorrectionMemory(tmp_path / "none.jsonl").recall("lift") == []


def test_an_edit_remembered_for_one_object_is_not_recalled_for_another(memory, embedder):
    """The issue's case: "a bit to the left" remembered for the red block was applied to an
    instruction about another object (similarity 0.82). Similar wording is not enough now."""
    other = "hover over the blue block"
    vectors = embedder.encode(["hover over the red block", other])
    assert float(np.dot(vectors[0], vectors[1])) >= 0.8  # similar enough without the scope
    assert memory.edits_for(other) == []
    assert [e.record.text for e in memory.edits_for("hover above the red block")] == [
        "a bit to the left"
    ]
    assert objects_named("put the red cube in the blue bowl") == {"red block", "blue bowl"}
    assert objects_named("move the gripper to the left") == frozenset()


def test_the_run_scope_recalls_only_what_this_run_remembered(memory, embedder):
    this_run = CorrectionMemory(memory.path, embedder=embedder, scope="run")
    assert this_run.edits_for("hover above the red block") == []  # made before it started
    this_run.remember("hover over the red block", classify("a bit higher", OBJECTS))
    assert [e.record.text for e in this_run.edits_for("hover above the red block")] == [
        "a bit higher"
    ]
    with pytest.raises(CorrectionError, match="scope"):
        CorrectionMemory(memory.path, embedder=embedder, scope="forever")


def test_the_memory_lists_and_forgets(memory, embedder):
    lines = memory.listing()
    assert len(lines) == 4 and "'a bit to the left' (offset) for 'hover over the red block'" in (
        lines[-1]
    )
    memory.recall("hover above the red block")  # builds the embedding cache
    assert memory.cache_path.exists()
    assert memory.forget() == 4
    assert not memory.path.exists() and not memory.cache_path.exists()
    assert memory.listing() == [] and memory.recall("hover over the red block") == []
    again = CorrectionMemory(memory.path, embedder=embedder)
    assert len(again) == 0


def test_corrections_of_the_same_millisecond_are_listed_newest_first(tmp_path, embedder):
    store = CorrectionMemory(tmp_path / "corrections.jsonl", embedder=embedder)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("lang2policy.corrections.memory.time.time", lambda: 1_700_000_000.0)
        store.remember("hover over the red block", classify("a bit to the left", OBJECTS))
        store.remember("hover over the red block", classify("slower", OBJECTS))
        store.remember("hover over the red block", classify("stop", OBJECTS))
    assert ["'stop'" in line for line in store.listing()] == [True, False, False]
    assert "'a bit to the left'" in store.listing()[-1]
