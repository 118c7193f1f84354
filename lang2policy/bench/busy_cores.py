"""Other processes keeping cores busy while a benchmark runs: the "busy 2-core machine" our
users have (a browser, a compiler, a training run beside the graph).

``busy_cores(n)`` starts ``n`` Python processes that spin at full speed at normal priority, as
a second program would, and stops them on leaving; ``n = 0`` starts nothing.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator

from lang2policy.errors import ConfigError

SPIN = "while True:\n    pass\n"


@contextlib.contextmanager
def busy_cores(count: int) -> Iterator[list[subprocess.Popen]]:
    """``count`` spinning processes for the duration of the block."""
    if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= 64:
        raise ConfigError(f"busy cores must be a whole number from 0 to 64, got {count!r}")
    spinners = [
        subprocess.Popen([sys.executable, "-c", SPIN], stdin=subprocess.DEVNULL)
        for _ in range(count)
    ]
    try:
        yield spinners
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
