"""The repository's own checks pass, so that ``pytest`` alone catches what ``scripts/test.sh``
catches with them:

- ``scripts/check_docs.sh``: builds ``docs/`` with ``mkdocs build --strict`` (a broken link or
  anchor between pages fails), keeps ``README.md`` at most 300 lines, and checks that every
  README link into ``docs/`` names an existing page and heading;
- ``scripts/check_types.sh``: runs mypy with ``[tool.mypy]`` of ``pyproject.toml`` on the
  packages it lists (conductor, safety, sandbox, rewards, planning).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CHECKS = [  # (script, the tool it needs in .venv/bin, the line it prints when all is well)
    ("check_docs.sh", "mkdocs", "[docs] OK"),
    ("check_types.sh", "mypy", "[types] OK"),
]


@pytest.mark.parametrize(("script", "tool", "ok"), CHECKS, ids=[c[0] for c in CHECKS])
def test_the_repository_check_passes(script: str, tool: str, ok: str) -> None:
    if not (REPO / ".venv" / "bin" / tool).exists():
        pytest.skip(f".venv/bin/{tool} is missing: run bash scripts/setup.sh")
    result = subprocess.run(
        ["bash", str(REPO / "scripts" / script)],
        cwd=REPO, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert result.returncode == 0, (
        f"scripts/{script} failed (exit {result.returncode}):\n{result.stdout}{result.stderr}"
    )
    assert ok in result.stdout
