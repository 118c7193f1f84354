"""Modules and functions in lang2policy/ stay short enough to read in one sitting.

No file over 400 lines (pure data tables, a module that is almost only literal data, may be
allowed by name below) and no function or method over 60 lines (``def`` line to last line,
nested functions included in their parent). See docs/architecture.md.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PKG_DIR = REPO / "lang2policy"
MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 60
# Modules that are (almost) only literal data, e.g. a table of constants: exempt from the file
# limit. Empty: no module of lang2policy/ is one today.
DATA_TABLES: frozenset[str] = frozenset()


def sources() -> list[Path]:
    return sorted(p for p in PKG_DIR.rglob("*.py") if "__pycache__" not in p.parts)


def test_no_file_over_the_limit():
    offenders = []
    for path in sources():
        relative = path.relative_to(REPO).as_posix()
        count = len(path.read_text(encoding="utf-8").splitlines())
        if count > MAX_FILE_LINES and relative not in DATA_TABLES:
            offenders.append(f"{relative}: {count} lines")
    assert not offenders, (
        f"{len(offenders)} files over {MAX_FILE_LINES} lines (split them by job; a pure data "
        "table may be listed in DATA_TABLES):\n" + "\n".join(offenders)
    )


def test_data_tables_exist():
    missing = sorted(name for name in DATA_TABLES if not (REPO / name).is_file())
    assert not missing, f"DATA_TABLES names files that do not exist: {missing}"


def test_no_function_over_the_limit():
    offenders = []
    for path in sources():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    relative = path.relative_to(REPO).as_posix()
                    offenders.append(f"{relative}:{node.lineno}: {node.name}() is {length} lines")
    assert not offenders, (
        f"{len(offenders)} functions over {MAX_FUNCTION_LINES} lines:\n" + "\n".join(offenders)
    )
