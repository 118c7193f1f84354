"""The Code-as-Policies planner: an instruction, the scene's objects and the session history in,
a policy program out (main code from the few-shot prompt, undefined functions generated below it).

The prompt is the fixed few-shot part of ``main.txt`` (API and examples, identical on every
call, so a llama.cpp server keeps it processed), then the variable tail::

    objects = ['red block', 'blue bowl']
    # put the red block in the blue bowl.        <- history: earlier instructions and their code
    put_first_on_second('red block', 'blue bowl')
    # (the red block was at [0.21, 0.06, 0.01])
    # now put it back.                           <- the new instruction; the model writes code

The answer ends at the next comment (stop ``\\n#``) or context line. The planner only writes
code; ``PlanLoop`` runs it through the sandbox.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from lang2policy.errors import LLMResponseError
from lang2policy.llm.exchange import LLM, LLMReply
from lang2policy.planning.code_grammar import CodeGrammars, check_program, code_grammars
from lang2policy.planning.codegen import (
    FunctionGenerator,
    clean_code,
    join_program,
    prompt_library,
)
from lang2policy.planning.examples import ExampleBank, ExampleRetriever
from lang2policy.planning.grounding import GroundingSettings
from lang2policy.planning.prompts import PromptSet, fill, objects_line
from lang2policy.planning.scoring import asks_for_motion, instruction_objects
from lang2policy.skills.catalog import prompt_api
from lang2policy.text_quote import prompt_block, prompt_quote

log = logging.getLogger("lang2policy.planning")

MAIN_STOP = ("\n#", "\nobjects =", "\n\n\n")
MAIN_MAX_TOKENS = 384


@dataclass
class GeneratedProgram:
    code: str  # the full program that runs in the sandbox (helpers first)
    main: str  # the code the main prompt produced
    functions: dict[str, str] = field(default_factory=dict)  # name -> generated source
    llm_calls: int = 0
    llm_seconds: float = 0.0
    unresolved: list[str] = field(default_factory=list)  # still undefined at the depth limit
    # The main code's log-likelihood (natural log, summed over logprob_tokens tokens), when
    # the endpoint reported it (candidates ask for it; see planning/candidates.py).
    logprob: float | None = None
    logprob_tokens: int | None = None
    # What breaks the code grammar's rules (code_grammar.check_program), checked when
    # grounding.grammar is on: a program with problems should not run (repair from these).
    problems: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)


class _Counter:
    """Sends prompts to the LLM and counts the calls and their latency.

    ``lenient`` calls (helper functions, parsing sub-prompts) keep an empty answer or one cut
    off at max_tokens: the generator uses the part of it that parses, if any."""

    def __init__(self, llm: LLM) -> None:
        self.llm, self.calls, self.seconds = llm, 0, 0.0
        self.first: LLMReply | None = None  # the first reply (the main code's)

    def __call__(
        self,
        prompt: str,
        stop: tuple[str, ...],
        max_tokens: int,
        lenient: bool = False,
        **options: Any,  # the LLM's call options (llm.exchange.CallOptions), e.g. grammar
    ) -> str:
        self.calls += 1
        try:
            reply = self.llm.complete(prompt, stop=list(stop), max_tokens=max_tokens, **options)
        except LLMResponseError as exc:
            if not (lenient and isinstance(exc.reply, LLMReply)):
                raise
            reply = exc.reply
            log.info("keeping an unusable answer (%s) for the generator to sort out", exc)
        self.seconds += reply.latency_s
        self.first = self.first or reply
        return reply.text


class CodeAsPoliciesPlanner:
    """Writes policy programs with an LLM in completion mode (see the module docstring).

    ``max_depth`` is how many levels of undefined functions are generated below the main code
    (0: none); ``vla``: a VLA runs in the graph, so the prompt's API (by default) and the
    grammars offer ``vla_skill`` too. LLM failures propagate as ``LLMError``.
    """

    def __init__(
        self,
        llm: LLM,
        prompts: PromptSet | None = None,
        max_depth: int = 2,
        *,
        grounding: GroundingSettings | None = None,
        vla: bool = False,
    ) -> None:
        if max_depth < 0:
            raise ValueError(f"max_depth must be >= 0, got {max_depth}")
        self.llm, self.vla = llm, vla
        self.prompts = prompts or PromptSet.load(api=prompt_api(vla=True) if vla else None)
        self.max_depth = max_depth
        self.grounding = grounding or GroundingSettings.off()
        self._retriever: ExampleRetriever | None = None  # built on first retrieval
        self._parser_retrievers: dict[str, ExampleRetriever] = {}
        # The helpers the function-writing prompt defines, reused as they are (grounding's
        # function_library): a program calling get_block_names() costs no second LLM call.
        self.library = (
            prompt_library(self.prompts.function) if self.grounding.function_library else {}
        )

    def generate(
        self, instruction: str, objects: list[str], history: list[tuple[str, str]]
    ) -> GeneratedProgram:
        """The program for ``instruction`` on a table with ``objects``, after ``history``."""
        return self._program(self.prompt_for(instruction, objects, history), objects, instruction)

    def prompt_for(
        self, instruction: str, objects: list[str], history: list[tuple[str, str]]
    ) -> str:
        """The prompt ``generate`` completes (``candidates`` samples it too)."""
        return self._context(objects, history, instruction) + _comment(instruction)

    def main_prompt(self, instruction: str, repair: bool = False, motion: bool = False) -> str:
        """The prompt's examples: all of ``main.txt``, or with ``grounding.retrieved_examples``
        > 0 every example that shows no repair (the fixed part, the same for every
        instruction, which the server keeps processed) followed by that many chosen by
        similarity, the most similar last (``examples``; a repair prompt chooses among
        ``repair_examples.txt`` too, and for an instruction that asks for ``motion`` only
        repairs that fix by moving). The recalled examples put the nearest pattern next to
        the instruction, which is what a 270M model copies, for the price of a few dozen
        tokens instead of a whole prompt of chosen examples evaluated per instruction."""
        k = self.grounding.retrieved_examples
        if k <= 0 or not instruction:
            return self.prompts.main
        retriever = self._example_retriever()
        chosen = retriever.choose(instruction, k, repair=repair, motion=motion)
        return self._fixed_examples() + "".join(example.text + "\n" for example in chosen)

    def _example_retriever(self) -> ExampleRetriever:
        if self._retriever is None:
            bank = self.prompts.main.rstrip("\n") + "\n" + self.prompts.repair_examples
            self._retriever = ExampleRetriever(ExampleBank.parse(bank))
        return self._retriever

    def _fixed_examples(self) -> str:
        """The preamble and every example that shows no repair, in file order."""
        bank = self._example_retriever().bank
        return bank.prompt([example for example in bank.examples if not example.repair])

    def parser_prompt(self, name: str, description: str) -> str:
        """The parsing sub-prompt ``name`` with all its examples, the one most similar to
        ``description`` last: the 270M model copies the nearest example, and "a point 8cm
        left of the red bowl" should sit next to the "left of" example, not the "between"
        one that happens to end the file."""
        retriever = self._parser_retrievers.get(name)
        if retriever is None:
            bank = ExampleBank.parse(self.prompts.parsers[name])
            retriever = ExampleRetriever(bank, ignore_colours=True)
            self._parser_retrievers[name] = retriever
        return retriever.prompt_for(description, len(retriever.bank.examples))

    def fixed_prompts(self) -> list[str]:
        """The parts of this planner's prompts that are the same for every instruction (the
        main prompt's preamble or whole example list, the function-writing prompt, the
        parsing prompts): what ``llm.warm.warm_up`` processes at start-up."""
        if self.grounding.retrieved_examples > 0:
            main = self._fixed_examples()
        else:
            main = self.prompts.main
        return [main, self.prompts.function, *self.prompts.parsers.values()]

    def repair(
        self,
        instruction: str,
        objects: list[str],
        history: list[tuple[str, str]],
        program: GeneratedProgram,
        feedback: str,
    ) -> GeneratedProgram:
        """A new program after ``program`` failed; ``feedback`` is the sandbox's
        ``PlanOutcome.feedback()``, quoted to the LLM as comment lines (``_comment_lines``);
        the program's lines are quoted too (``prompt_block``)."""
        tail = fill(
            self.prompts.repair,
            code=prompt_block(program.code.strip("\n")),
            feedback=_comment_lines(feedback),
            instruction=prompt_quote(_sentence(instruction)),
        )
        motion = asks_for_motion(instruction, objects)
        context = self._context(objects, history, instruction, repair=True, motion=motion)
        prompt = context + _comment(instruction) + tail.strip("\n") + "\n"
        return self._program(prompt, objects, instruction)

    def _context(
        self,
        objects: list[str],
        history: list[tuple[str, str]],
        instruction: str = "",
        repair: bool = False,
        motion: bool = False,
    ) -> str:
        main = self.main_prompt(instruction, repair, motion)
        lines = [main.rstrip("\n"), objects_line(objects)]
        for past_instruction, code in history:
            lines.append(_comment(past_instruction).rstrip("\n"))
            lines.append(prompt_block(code.strip("\n")))
        return "\n".join(lines) + "\n"

    def _program(self, prompt: str, objects: list[str], instruction: str) -> GeneratedProgram:
        ask = _Counter(self.llm)
        started = time.monotonic()
        main = self.decode(ask, prompt, objects, instruction=instruction)
        return self.finish(main, objects, ask, started)

    def decode(
        self,
        ask: _Counter,
        prompt: str,
        objects: list[str],
        *,
        instruction: str = "",
        **options: Any,
    ) -> str:
        """The main code for ``prompt`` (cleaned), decoded under the main-code grammar of
        ``instruction`` where the endpoint takes llama.cpp grammars (``grammars``). The local
        server samples grammar-first (``llm.llama_grammar_first``): a grammar costs time only
        at tokens it refuses."""
        grammars = self.grammars(objects, instruction)
        if grammars is not None:
            options = {"grammar": grammars.main, **options}
        return clean_code(ask(prompt, MAIN_STOP, MAIN_MAX_TOKENS, **options))

    def grammars(self, objects: list[str], instruction: str = "") -> CodeGrammars | None:
        """The code grammars to decode under (``code_grammar``; the main code's names only
        the objects ``instruction`` names, when it names two or more), or None:
        ``grounding.grammar`` is off, or the endpoint takes no llama.cpp grammar (chat mode;
        ``finish`` checks the same rules after decoding instead)."""
        if not self.grounding.grammar or self.llm.config.mode != "completion":
            return None
        focus = instruction_objects(instruction, objects) if instruction else []
        return code_grammars(objects, self.prompts.parsers, focus, instruction, vla=self.vla)

    def finish(
        self, main: str, objects: list[str], ask: _Counter, started: float
    ) -> GeneratedProgram:
        """The program around ``main`` (its undefined functions generated with ``ask``),
        with the main reply's log-likelihood when the endpoint reported it."""
        generator = FunctionGenerator(
            ask,
            self.prompts.function,
            self.prompts.parsers,
            self.max_depth,
            grammars=self.grammars(objects),
            library=self.library,
            parser_prompt=self.parser_prompt if self.grounding.retrieved_examples > 0 else None,
        )
        generated = generator.generate(main, objects)
        code = join_program(generated.functions, main)
        grounded = self.grounding.grammar
        program = GeneratedProgram(
            code=code,
            main=main,
            functions=generated.functions,
            llm_calls=ask.calls,
            llm_seconds=ask.seconds,
            unresolved=generated.unresolved,
            logprob=ask.first.logprob if ask.first else None,
            logprob_tokens=ask.first.logprob_tokens if ask.first else None,
            problems=check_program(code, objects, self.prompts.parsers) if grounded else [],
        )
        log.info(
            "planned %d lines, %d functions, %d LLM calls (%.2f s LLM, %.2f s total)%s",
            program.code.count("\n"),
            len(program.functions),
            program.llm_calls,
            program.llm_seconds,
            time.monotonic() - started,
            f"; undefined at depth {self.max_depth}: {program.unresolved}"
            if program.unresolved
            else "",
        )
        return program


def _sentence(instruction: str) -> str:
    """One line that ends in a full stop (or the question or exclamation mark it has)."""
    text = " ".join(instruction.split()).rstrip(".")
    return text if text.endswith(("?", "!")) else text + "."


def _comment(instruction: str) -> str:
    return f"# {prompt_quote(_sentence(instruction))}\n"


def _comment_lines(feedback: str) -> str:
    """The feedback's ``\\n``-separated lines joined by ``\\n# ``, for the template's
    ``# error: {feedback}``: each line quoted with ``prompt_quote``, so no other line break in
    the text (``\\r``, U+0085, U+2028, ...) can end the comment and start a line of code."""
    return "\n# ".join(prompt_quote(line) for line in feedback.strip().split("\n"))
