"""Benchmarks behind ``lang2policy bench <name>``; each prints figures, or JSON with --json."""
