"""The test tree's own rules (docs/testing.md): each fixture name is defined in one file, and
no test module imports another test module (what two share lives in test/support/ or in a
conftest.py). Read statically from the source, nothing is imported."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

TEST = Path(__file__).resolve().parents[1]


def python_files() -> list[Path]:
    return sorted(p for p in TEST.rglob("*.py") if "fixtures" not in p.relative_to(TEST).parts)


def is_fixture(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return ast.unparse(target).split(".")[-1] == "fixture"


def fixture_names(tree: ast.Module) -> list[str]:
    names = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for decorator in filter(is_fixture, node.decorator_list):
                name = node.name
                if isinstance(decorator, ast.Call):
                    for keyword in decorator.keywords:
                        if keyword.arg == "name" and isinstance(keyword.value, ast.Constant):
                            name = keyword.value.value
                names.append(name)
    return names


def imported_modules(tree: ast.Module) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
    return found


def test_each_fixture_name_is_defined_in_one_file():
    where = defaultdict(list)
    for path in python_files():
        for name in fixture_names(ast.parse(path.read_text())):
            where[name].append(str(path.relative_to(TEST)))
    repeated = {name: files for name, files in where.items() if len(files) > 1}
    assert not repeated, f"fixtures defined in more than one file (rename or share): {repeated}"


def test_no_test_module_imports_another():
    offenders = []
    for path in python_files():
        for module in imported_modules(ast.parse(path.read_text())):
            if module.split(".")[-1].startswith("test_") or module.split(".")[0] == "conftest":
                offenders.append(f"{path.relative_to(TEST)} imports {module}")
    assert not offenders, "a test module imports a test module:\n" + "\n".join(offenders)


def test_test_files_sit_in_the_mirror():
    """test/<package>/test_*.py for a lang2policy subpackage (or project/), or test/test_*.py for
    a top-level module; the support package holds no tests."""
    package = TEST.parent / "lang2policy"
    allowed = {p.name for p in package.iterdir() if (p / "__init__.py").is_file()} | {"project"}
    misplaced = []
    for path in TEST.rglob("test_*.py"):
        parts = path.relative_to(TEST).parts
        if parts[0] == "fixtures":
            continue
        if len(parts) > 2 or (len(parts) == 2 and parts[0] not in allowed):
            misplaced.append(str(path.relative_to(TEST)))
    assert not misplaced, f"test files outside the mirror of lang2policy/: {misplaced}"


def test_the_slow_files_conftest_names_exist():
    """``SLOW_FILES`` in test/conftest.py names files by path: a moved or renamed file would
    silently fall back into the fast loop."""
    text = (TEST / "conftest.py").read_text()
    table = text.split("SLOW_FILES = {", 1)[1].split("}", 1)[0]
    names = [part.split('"')[1] for part in table.split(",") if '"' in part]
    assert names and [n for n in names if not (TEST / n).is_file()] == []
