"""The documentation builds: ``scripts/check_docs.sh`` passes.

The script builds ``docs/`` with ``mkdocs build --strict`` (a broken link or anchor between
pages fails), keeps ``README.md`` at most 300 lines, and checks that every README link into
``docs/`` names an existing page and heading. Running it here makes ``pytest`` alone catch
broken docs, as ``scripts/test.sh`` does.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "check_docs.sh"
MKDOCS = REPO / ".venv" / "bin" / "mkdocs"
NO_MKDOCS = ".venv/bin/mkdocs is missing: run bash scripts/setup.sh (it is in requirements-dev.txt)"


@pytest.mark.skipif(not MKDOCS.exists(), reason=NO_MKDOCS)
def test_docs_build_strictly_and_readme_links_resolve() -> None:
    result = subprocess.run(
        ["bash", str(SCRIPT)], cwd=REPO, capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, (
        f"scripts/check_docs.sh failed (exit {result.returncode}):\n{result.stdout}{result.stderr}"
    )
    assert "[docs] OK" in result.stdout
