"""The paraphrased pick-and-place benchmark: the instruction set (30 distinct, resolvable, kept
apart from the prompt examples and from the phrasings of ``bench cap``), its seeded scenes, the
reference program on a sample of them, and the report with both grounding tracks from a
scripted LLM (no local model)."""

from __future__ import annotations

import json
import re

import pytest
from support.bench_llm import ScriptedCodeLLM

from lang2policy.bench import paraphrase
from lang2policy.bench.cap_splits import PHRASINGS
from lang2policy.bench.registry import BENCHES, parser
from lang2policy.errors import ConfigError
from lang2policy.paths import config_dir

PARAPHRASES = paraphrase.load_paraphrases()


def _words(text: str) -> str:
    """Lower case, punctuation dropped, single spaces: how two phrasings compare."""
    return " ".join(re.sub(r"[^a-z' ]", " ", text.lower()).split())


def test_thirty_distinct_instructions_name_their_block_and_bowl():
    assert len(PARAPHRASES) == 30
    assert len({_words(p.text) for p in PARAPHRASES}) == 30
    for p in PARAPHRASES:
        assert p.block.endswith(" block") and p.bowl.endswith(" bowl"), p
        assert p.block in p.text and p.bowl in p.text, p
    verbs = {_words(p.text).split()[0] for p in PARAPHRASES}
    assert len(verbs) >= 15, verbs  # varied sentence openings, not one template


def test_no_instruction_is_a_prompt_example_or_a_cap_phrasing():
    prompts = [path for path in (config_dir() / "prompts").rglob("*") if path.is_file()]
    assert any(path.name == "main.txt" for path in prompts)
    for path in prompts:
        text = _words(path.read_text(encoding="utf-8"))
        for p in PARAPHRASES:
            assert _words(p.text) not in text, (p.text, path)
    templates = [t for side in PHRASINGS["pick_place"] for t in side]
    for template in templates:  # no template of bench cap, filled in, inside an instruction
        marked = _words(template.replace("{block}", "blockx").replace("{bowl}", "bowlx"))
        pattern = re.escape(marked).replace("blockx", r"\w+ block").replace("bowlx", r"\w+ bowl")
        for p in PARAPHRASES:
            assert not re.search(pattern, _words(p.text)), (p.text, template)


def test_a_bad_set_is_refused(tmp_path):
    bad = tmp_path / "set.yaml"
    bad.write_text(
        "instructions:\n  - {text: put the red blok in the blue bowl, block: red blok, "
        "bowl: blue bowl}\n"
    )
    with pytest.raises(ConfigError, match="red blok"):
        paraphrase.load_paraphrases(bad)


def test_scenes_hold_the_named_objects_and_are_seeded(session):
    for index, p in enumerate(PARAPHRASES):
        episode = paraphrase.make_episode(session, p, 0, index)
        assert p.block in episode.objects and p.bowl in episode.objects
        assert len(set(episode.objects)) == 4
        assert set(session.world.object_names()) >= set(episode.objects)
        assert not session.world.is_in(p.block, p.bowl)
        assert episode.instruction == p.text
        again = paraphrase.make_episode(session, p, 0, index)
        assert (again.reset_seed, again.objects) == (episode.reset_seed, episode.objects)


def test_reference_programs_reach_the_relation():
    """The scenes are solvable: the reference program reaches the relation on a sample."""
    report = paraphrase.run("so101", None, seed=0, limit=3, oracle=True, progress=False)
    assert report["tracks"] == ["oracle"]
    assert report["results"]["oracle"]["successes"] == 3, paraphrase.format_text(report)


def test_report_has_both_grounding_tracks_per_instruction(session):
    programs = {
        p.text: f"put_first_on_second({p.block!r}, {p.bowl!r})\ngo_home()" for p in PARAPHRASES[:2]
    }
    llm = ScriptedCodeLLM(programs)
    report = paraphrase.run("so101", "scripted", "both", limit=2, progress=False, client=llm)
    assert report["tracks"] == ["llm", "llm-off"]
    assert report["instructions"] == 2 and llm.calls >= 4
    for track in ("llm", "llm-off"):
        result = report["results"][track]
        assert (result["successes"], result["episodes"]) == (2, 2), paraphrase.format_text(report)
        for seconds in ("llm_seconds", "planning_seconds"):
            stats = result["latency"][seconds]
            assert 0 < stats["p50"] <= stats["p90"], stats
    first = report["episodes"][0]
    assert first["instruction"] == PARAPHRASES[0].text
    assert first["llm"]["success"] and first["llm-off"]["success"]
    second = report["episodes"][1]  # a statement, not a polite question: the planner's own goal
    assert second["llm"]["verdict"] == second["llm-off"]["verdict"] == "goal_reached"
    assert "put_first_on_second" in first["llm-off"]["code"]
    text = paraphrase.format_text(report)
    assert "llm      reached 2/2 (100%)" in text and "llm-off  reached 2/2 (100%)" in text
    assert "p50" in text and "p90" in text and PARAPHRASES[1].text in text
    json.dumps(report)


def test_command_line():
    assert "paraphrase" in BENCHES
    args = parser("paraphrase").parse_args(["--limit", "5", "--grounding", "off"])
    assert (args.limit, args.grounding, args.llm) == (5, "off", "local")
    assert parser("paraphrase").parse_args([]).grounding == "both"
    with pytest.raises(ConfigError, match="limit"):
        paraphrase.run("so101", None, limit=0, oracle=True, progress=False)
