"""Benchmarks run by ``lang2policy bench <name>``; each prints its figures (and JSON with --json)."""
