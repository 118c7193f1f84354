"""Several candidate programs for one instruction, and the best of them by score (issue 15).

``candidates`` asks the planner's LLM for the greedy program (temperature 0, what the planner
writes today) and ``n - 1`` sampled ones (``SAMPLE_TEMPERATURE``, seeds 1..n-1, so a run is
reproducible and a record/replay cache answers it), each decoded as ``planner.generate``
decodes (under the code grammar where the planner's grounding asks for it); it keeps each
distinct main code once (helper functions are generated for it as usual) and records the
main code's log-likelihood where the endpoint reports token logprobs (OpenAI, vLLM, and the
local llama.cpp server through ``llm.llama_logprobs``). ``choose`` scores every candidate
(``scoring.score``) and keeps the best, with the others as alternatives for the status
detail. ``plan`` does both with the planner's ``GroundingSettings.candidates``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from lang2policy.errors import LLMRequestError, LLMResponseError
from lang2policy.planning.cap import CodeAsPoliciesPlanner, GeneratedProgram, _Counter
from lang2policy.planning.scoring import Checks, Score, score

log = logging.getLogger("lang2policy.planning")

# Diverse enough to give a 270M model's second-best reading a chance, low enough that the
# samples stay programs (at 1.0 it often writes prose or repeats the examples).
SAMPLE_TEMPERATURE = 0.7
# Top alternatives per token asked for with logprobs: only the chosen token's is used.
LOGPROBS = 1


def candidates(
    planner: CodeAsPoliciesPlanner,
    instruction: str,
    objects: list[str],
    history: list[tuple[str, str]],
    n: int,
    *,
    temperature: float = SAMPLE_TEMPERATURE,
) -> list[GeneratedProgram]:
    """The greedy program first, then up to ``n - 1`` distinct sampled ones.

    A sampled answer that is empty or cut off is skipped (the greedy one's errors propagate,
    as from ``planner.generate``); the LLM calls of skipped and duplicate samples are
    counted in the program they duplicate (or the greedy one). If the endpoint rejects the
    ``logprobs`` field (HTTP 4xx) the calls go on without it and ``GeneratedProgram.logprob``
    stays None.
    """
    prompt = planner.prompt_for(instruction, objects, history)
    programs: list[GeneratedProgram] = []
    seen: set[str] = set()
    logprobs: int | None = LOGPROBS
    for index in range(max(1, n)):
        options: dict[str, object] = {} if index == 0 else {"temperature": temperature}
        if index:
            options["seed"] = index
        ask, started = _Counter(planner.llm), time.monotonic()
        try:
            try:
                main = planner.decode(
                    ask, prompt, objects, instruction=instruction, logprobs=logprobs, **options
                )
            except LLMRequestError:
                if logprobs is None:
                    raise
                log.info("the endpoint rejected logprobs; candidates go on without them")
                logprobs, ask.first = None, None
                main = planner.decode(ask, prompt, objects, instruction=instruction, **options)
        except LLMResponseError as exc:
            if index == 0:
                raise
            log.info("skipping sampled candidate %d: %s", index, exc)
            _charge(programs[0], ask)
            continue
        if main in seen:
            _charge(next(p for p in programs if p.main == main), ask)
            continue
        seen.add(main)
        programs.append(planner.finish(main, objects, ask, started))
    return programs


def _charge(program: GeneratedProgram, ask: _Counter) -> None:
    """Count a sample that gave no new program (a duplicate, or unusable) in the calls and
    seconds of ``program`` (its duplicate, or the greedy one), so totals stay true."""
    program.llm_calls += ask.calls
    program.llm_seconds += ask.seconds


def mean_logprob(program: GeneratedProgram) -> float | None:
    """The main code's log-likelihood per token, or None when it was not reported."""
    if program.logprob is None or not program.logprob_tokens:
        return None
    return program.logprob / program.logprob_tokens


@dataclass
class Choice:
    """The best candidate, its score, and every other candidate as
    ``{"code", "score", "reasons"}`` (best first), as the status detail lists them."""

    program: GeneratedProgram
    score: Score
    alternatives: list[dict] = field(default_factory=list)
    llm_calls: int = 0  # over all candidates
    llm_seconds: float = 0.0


def choose(
    programs: Sequence[GeneratedProgram],
    instruction: str,
    objects: Sequence[str],
    checks: Checks | None = None,
    provided: Iterable[str] = (),
) -> Choice:
    """Score ``programs`` and keep the highest (the earliest on a tie: the greedy one);
    ``provided``: the planner's parsing helpers (``PromptSet.parsers``)."""
    if not programs:
        raise ValueError("choose needs at least one candidate program")
    extra = [checks] if checks is not None else []
    scored = [
        (
            score(
                p.code,
                instruction,
                objects,
                checks=extra,
                mean_logprob=mean_logprob(p),
                provided=provided,
            ),
            i,
            p,
        )
        for i, p in enumerate(programs)
    ]
    scored.sort(key=lambda item: (-item[0].total, item[1]))
    (best_score, _, best), others = scored[0], scored[1:]
    for rank, (s, i, _p) in enumerate(scored):
        log.info("candidate %d (rank %d): %.2f %s", i, rank, s.total, "; ".join(s.reasons))
    return Choice(
        program=best,
        score=best_score,
        alternatives=[
            {"code": p.code, "score": s.total, "reasons": s.reasons} for s, _, p in others
        ],
        llm_calls=sum(p.llm_calls for p in programs),
        llm_seconds=sum(p.llm_seconds for p in programs),
    )


def plan(
    planner: CodeAsPoliciesPlanner,
    instruction: str,
    objects: list[str],
    history: list[tuple[str, str]],
    checks: Checks | None = None,
) -> Choice:
    """``planner.grounding.candidates`` candidates, scored; the best with its alternatives."""
    programs = candidates(planner, instruction, objects, history, planner.grounding.candidates)
    return choose(programs, instruction, objects, checks, provided=tuple(planner.prompts.parsers))
