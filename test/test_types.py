"""The core packages type-check: ``scripts/check_types.sh`` passes.

The script runs mypy with ``[tool.mypy]`` of ``pyproject.toml`` (the packages it lists:
conductor, safety, sandbox, rewards, planning). Running it here makes ``pytest`` alone catch a
type error in them, as ``scripts/test.sh`` does.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "check_types.sh"
MYPY = REPO / ".venv" / "bin" / "mypy"
NO_MYPY = ".venv/bin/mypy is missing: run bash scripts/setup.sh (it is in requirements-dev.txt)"


@pytest.mark.skipif(not MYPY.exists(), reason=NO_MYPY)
def test_core_packages_type_check() -> None:
    result = subprocess.run(
        ["bash", str(SCRIPT)], cwd=REPO, capture_output=True, text=True, timeout=600, check=False
    )
    assert result.returncode == 0, (
        f"scripts/check_types.sh failed (exit {result.returncode}):\n{result.stdout}{result.stderr}"
    )
    assert "[types] OK" in result.stdout
