"""``lang2policy bench <name>``: one subcommand per benchmark of the table
(``lang2policy.bench.registry.BENCHES``), each with ``--json``."""

from __future__ import annotations

import argparse
import sys

from lang2policy.cli_types import print_report


def add_parser(commands) -> None:
    from lang2policy.bench.registry import BENCHES

    benches = commands.add_parser("bench", help="benchmarks").add_subparsers(
        dest="bench", required=True
    )
    for bench in BENCHES.values():
        parser = benches.add_parser(bench.name, help=bench.help)
        bench.configure(parser)
        # bench/ imports no ROS: the parity bench's probe node is handed in from here
        if bench.name == "parity":
            parser.set_defaults(open_probe=_open_parity_probe)


def _open_parity_probe(domain_id: int):
    from lang2policy.ros.parity_probe import ParityProbe

    return ParityProbe(domain_id)


def run(args: argparse.Namespace) -> int:
    from lang2policy.bench.registry import BENCHES

    bench = BENCHES[args.bench]
    try:
        report = bench.run(args)
    except KeyboardInterrupt:
        print(f"lang2policy bench {bench.name}: interrupted", file=sys.stderr)
        return 130
    print_report(report, args.json, bench.format_text)
    return bench.exit_code(report)
