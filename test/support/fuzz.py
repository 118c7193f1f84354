"""Hypothesis settings shared by the fuzz tests: small in CI, larger on request.

``L2P_FUZZ_EXAMPLES=2000`` for a longer local run; CI keeps the default (each file runs in
seconds).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

EXAMPLES = int(os.environ.get("L2P_FUZZ_EXAMPLES", "60"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
