"""Every benchmark of ``lang2policy bench``, in one table.

A benchmark is its arguments (``add_arguments(parser)``), a run that turns the parsed arguments
into a JSON-able report (``run(args)``; a bad value raises ``Lang2PolicyError``), the report as
text (``format_text``) and the exit status the report earns (``exit_code``, 0 unless the
benchmark passes or fails). The command line builds ``lang2policy bench <name>`` from
``BENCHES``; ``Bench.configure`` adds ``--json`` (print the report as JSON, no progress bars)
to each, so every ``run`` may read ``args.json``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

from lang2policy.bench import (
    cap,
    controller_rate,
    corrections,
    ddp,
    executor,
    graph_bench,
    graph_idle,
    ik_speed,
    intents,
    l2r,
    llm_warm,
    mpc,
    paraphrase,
    parity,
    perception,
    pickplace,
    redteam,
    rl,
    sim_speed,
    vla_corrections,
    vla_graph,
)


def _ran(report: dict) -> int:
    return 0


@dataclass(frozen=True)
class Bench:
    """One benchmark: its name under ``lang2policy bench``, its one-line help and its parts."""

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], dict]
    format_text: Callable[[dict], str]
    exit_code: Callable[[dict], int] = _ran

    def configure(self, parser: argparse.ArgumentParser) -> None:
        """The benchmark's arguments and ``--json`` on ``parser``."""
        self.add_arguments(parser)
        parser.add_argument("--json", action="store_true", help="print JSON only")


BENCHES: dict[str, Bench] = {
    bench.name: bench
    for bench in (
        Bench(
            "pickplace",
            "pick-and-place success rate",
            pickplace.add_arguments,
            pickplace.run_args,
            pickplace.format_text,
        ),
        Bench(
            "redteam",
            "the safety layer attacked through the graph (reversals, zones, kills), by effect",
            redteam.add_arguments,
            redteam.run_args,
            redteam.format_text,
            redteam.exit_code,
        ),
        Bench(
            "ik",
            "IK host time per pick-and-place, with the descent's stall test and without",
            ik_speed.add_arguments,
            ik_speed.run_args,
            ik_speed.format_text,
        ),
        Bench(
            "sim",
            "physics steps/s, real-time factor, render fps",
            sim_speed.add_arguments,
            sim_speed.run_args,
            sim_speed.format_text,
        ),
        Bench(
            "cap",
            "Code-as-Policies tabletop tasks: oracle and LLM tracks",
            cap.add_arguments,
            cap.run_args,
            cap.format_text,
        ),
        Bench(
            "paraphrase",
            "30 paraphrased pick-and-place instructions: reach rate and planning latency, "
            "grounding on and off",
            paraphrase.add_arguments,
            paraphrase.run_args,
            paraphrase.format_text,
        ),
        Bench(
            "intents",
            "sandbox intent round trip vs in-process calls",
            intents.add_arguments,
            intents.run_args,
            intents.format_text,
        ),
        Bench(
            "l2r",
            "Language-to-Rewards tasks: reference and LLM specs",
            l2r.add_arguments,
            l2r.run_args,
            l2r.format_text,
        ),
        Bench(
            "llm-warm",
            "warming the planners' fixed prompts: a first start vs restarts that find the "
            "processed prefixes on disk",
            llm_warm.add_arguments,
            llm_warm.run_args,
            llm_warm.format_text,
        ),
        Bench(
            "vla",
            "the trained VLA policy in closed loop on unseen layouts, by task family and split "
            "(seen / unseen combinations / unseen phrasings), beside the scripted oracle; "
            "latency per action on one core; a video. --graph: through the ROS graph (sim, "
            "safety and VLA nodes as processes) beside standalone on the same episodes",
            vla_graph.add_arguments,
            vla_graph.run_args,
            vla_graph.format_text,
            vla_graph.exit_code,
        ),
        Bench(
            "vla-corrections",
            "the VLA corrected in words by a scripted person on N episodes, fine-tuned on them: "
            "success before and after on the same unseen layouts (issue 18, YAY style)",
            vla_corrections.add_arguments,
            vla_corrections.run_args,
            vla_corrections.format_text,
        ),
        Bench(
            "executor",
            "the same scripted demonstrations on the local process pool and on Ray with 1 and "
            "2 workers: wall time and episodes/s side by side, the episodes compared",
            executor.add_arguments,
            executor.run_args,
            executor.format_text,
            executor.exit_code,
        ),
        Bench(
            "mpc",
            "MPC rollout/planning speed vs a Python mj_step loop",
            mpc.add_arguments,
            mpc.run_args,
            mpc.format_text,
        ),
        Bench(
            "rl",
            "per task family on the same seeded held-out goals: the shipped RL policy, the MPC "
            "and the distilled policy (success, time to success, smoothness, control cost); "
            "training time; policy inference speed beside one MPC iteration",
            rl.add_arguments,
            rl.run_args,
            rl.format_text,
            rl.exit_code,
        ),
        Bench(
            "controller-rate",
            "the MPC controller node's planning rate in a live graph vs standalone",
            controller_rate.add_arguments,
            controller_rate.run_args,
            controller_rate.format_text,
            controller_rate.exit_code,
        ),
        Bench(
            "corrections",
            "scripted corrections (offset, target swap, speed): success with and without, "
            "latency, memory",
            corrections.add_arguments,
            corrections.run_args,
            corrections.format_text,
        ),
        Bench(
            "idle",
            "CPU per node of the idle graph (processes, ground-truth perception), "
            f"against the target of {graph_idle.TARGET_CORES:g} core in total",
            graph_idle.add_arguments,
            graph_idle.run_args,
            graph_idle.format_text,
            graph_idle.exit_code,
        ),
        Bench(
            "graph",
            "the live graph end to end: start-up, instruction -> first motion, wall vs motion "
            "time, success in the sim, idle CPU, controller rate, stop; against issue 16's targets",
            graph_bench.add_arguments,
            graph_bench.run_args,
            graph_bench.format_text,
            graph_bench.exit_code,
        ),
        Bench(
            "perception",
            "camera perception vs ground truth per realism level (off, mild, hard): detection, "
            "phantoms, position and yaw error at rest and while the arm moves, frames/s; PNG/MP4",
            perception.add_arguments,
            perception.run_args,
            perception.format_text,
            perception.exit_code,
        ),
        Bench(
            "ddp",
            "train vla in one process and data-parallel (torchrun): loss curves side by side, "
            "samples/s, the data loader's share of step time",
            ddp.add_arguments,
            ddp.run_args,
            ddp.format_text,
        ),
        Bench(
            "parity",
            "the same scenario on the sim node and on the SO-101 driver + emulated arm: "
            "topics, types, rates, joint names, tracking difference",
            parity.add_arguments,
            parity.run_args,
            parity.format_text,
            parity.exit_code,
        ),
    )
}


def parser(name: str) -> argparse.ArgumentParser:
    """The command line of one benchmark on its own (``lang2policy bench <name>``)."""
    alone = argparse.ArgumentParser(prog=f"lang2policy bench {name}")
    BENCHES[name].configure(alone)
    return alone
