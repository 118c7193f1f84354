"""Import boundaries of the core, read statically from the source (nothing is imported).

Every import in ``lang2policy/`` is checked: module-level ones, ones inside functions, ones under
``if TYPE_CHECKING:`` and ``importlib.import_module("...")`` / ``__import__("...")`` calls
with a literal name. The rules (docs/architecture.md):

- no ROS import (rclpy, launch, message/service/interface packages, rosbag2, mcap_ros2 ...)
  outside ``lang2policy/ros/`` (``launch/`` is outside the package);
- a module imports only from its own layer or a lower one; the layers are the table in
  docs/architecture.md, parsed here so the document and the test cannot drift;
- a package's ``__init__.py`` imports nothing above a submodule the table places lower
  (``graph/__init__.py`` runs whenever ``graph.topics`` is imported);
- no import cycle between packages, and none between modules;
- inside a package split into wings (``vla``'s subpackages; the wing table in
  docs/architecture.md, parsed here too), every module is in a wing, a wing imports only from
  itself and lower wings, the package's ``__init__.py`` imports no wing, and no wing imports
  another wing's private names (a name or a module with a leading underscore).
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PKG = "lang2policy"
PKG_DIR = REPO / PKG
DOC = REPO / "docs" / "architecture.md"
ROS_PACKAGE = f"{PKG}.ros"
ROOT_UNIT = "__init__"  # the table's name for lang2policy/__init__.py

ROS_EXACT = frozenset(
    {"rclpy", "launch", "launch_ros", "launch_testing", "ament_index_python", "rosbag2_py"}
    | {"rpyutils", "rcutils", "tf2_ros", "message_filters", "cv_bridge", "rosidl_runtime_py"}
)
ROS_PREFIXES = ("rosidl_", "mcap_ros2", "rosbag2")
ROS_SUFFIXES = ("_msgs", "_srvs", "_interfaces")
RULE_LAYERS = "a module may import only from its own layer or a lower one"
RULE_TABLE = "the layer table in docs/architecture.md (between the layers:begin/end markers)"
RULE_WINGS = "a wing may import only from its own wing or a lower one of its package"
RULE_WING_TABLE = "the wing table in docs/architecture.md (between the wings:begin/end markers)"
RULE_PRIVATE = "no wing imports another wing's private names (leading underscore)"


@dataclass(frozen=True)
class Import:
    """One import: where it is, what it names, and how it is reached."""

    path: Path  # relative to the repository
    line: int
    source: str  # the importing module, dotted
    target: str  # the imported module, dotted (resolved to a module where one exists)
    statement: str  # the import as written
    where: str  # "", "inside a function", "under TYPE_CHECKING"
    names: tuple[str, ...] = ()  # every dotted name the statement takes (module.name for a from)

    def at(self) -> str:
        suffix = f" ({self.where})" if self.where else ""
        return f"{self.path}:{self.line}: `{self.statement}`{suffix}"


# ------------------------------------------------------------------ reading the table
def read_layers(doc: Path = DOC) -> dict[str, tuple[int, str]]:
    """``{unit: (layer, layer name)}`` from the table between the layers markers of ``doc``."""
    text = doc.read_text(encoding="utf-8")
    match = re.search(r"<!-- layers:begin -->(.*?)<!-- layers:end -->", text, re.DOTALL)
    assert match, f"{doc}: no <!-- layers:begin --> ... <!-- layers:end --> table"
    layers: dict[str, tuple[int, str]] = {}
    for row in match.group(1).strip().splitlines():
        cells = [cell.strip() for cell in row.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].isdigit():
            continue  # the header and its rule
        for unit in re.findall(r"`([^`]+)`", cells[2]):
            assert unit not in layers, f"{doc}: {unit!r} is in the layer table twice"
            layers[unit] = (int(cells[0]), cells[1])
    assert layers, f"{doc}: the layer table has no rows"
    return layers


def unit_of(module: str, layers: dict[str, tuple[int, str]]) -> str | None:
    """The table unit of a dotted ``lang2policy`` module: its longest listed prefix."""
    parts = module.split(".")[1:]
    if not parts:
        return ROOT_UNIT if ROOT_UNIT in layers else None
    for end in range(len(parts), 0, -1):
        name = ".".join(parts[:end])
        if name in layers:
            return name
    return None


def read_wings(doc: Path = DOC) -> dict[str, int]:
    """``{wing: order}`` from the table between the wings markers of ``doc`` (``vla.spec``: 0)."""
    text = doc.read_text(encoding="utf-8")
    match = re.search(r"<!-- wings:begin -->(.*?)<!-- wings:end -->", text, re.DOTALL)
    assert match, f"{doc}: no <!-- wings:begin --> ... <!-- wings:end --> table"
    wings: dict[str, int] = {}
    for row in match.group(1).strip().splitlines():
        cells = [cell.strip() for cell in row.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].isdigit():
            continue  # the header and its rule
        (wing,) = re.findall(r"`([^`]+)`", cells[1])
        assert wing not in wings, f"{doc}: {wing!r} is in the wing table twice"
        assert "." in wing, f"{doc}: wing {wing!r} is not package.wing"
        wings[wing] = int(cells[0])
    assert wings, f"{doc}: the wing table has no rows"
    return wings


def winged_packages(wings: dict[str, int]) -> set[str]:
    """The packages split into wings, dotted under lang2policy (``vla``)."""
    return {wing.rpartition(".")[0] for wing in wings}


def wing_of(name: str, wings: dict[str, int]) -> str | None:
    """The wing of a dotted ``lang2policy`` name (module or module.attribute), if it is in one."""
    parts = name.split(".")[1:]
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in wings:
            return ".".join(parts[:end])
    return None


# ------------------------------------------------------------------ reading the imports
def module_files() -> dict[str, Path]:
    """Every module under lang2policy/, by dotted name."""
    found = {}
    for path in sorted(PKG_DIR.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(node: ast.AST, where: str = "") -> Iterator[tuple[ast.AST, str]]:
    """Every node under ``node`` with how an import there is reached."""
    for child in ast.iter_child_nodes(node):
        here = where
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            here = where or "inside a function"
        yield child, here
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for stmt in child.body:
                yield stmt, "under TYPE_CHECKING"
                yield from _walk(stmt, "under TYPE_CHECKING")
            for stmt in child.orelse:
                yield stmt, here
                yield from _walk(stmt, here)
            continue
        yield from _walk(child, here)


def _literal_import(call: ast.Call) -> str | None:
    """The module named by ``importlib.import_module("x")`` / ``__import__("x")``, if literal."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if name not in ("import_module", "__import__") or not call.args:
        return None
    first = call.args[0]
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        return first.value
    return None


def _resolve(name: str, modules: dict[str, Path]) -> str:
    """The longest prefix of ``name`` that is a module under lang2policy/ (else ``name``)."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules:
            return candidate
    return name


def _from_base(node: ast.ImportFrom, package: str) -> str:
    """The dotted module a ``from ... import`` statement imports from, relative ones resolved."""
    base = node.module or ""
    if node.level:
        anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
        base = ".".join(anchor + ([node.module] if node.module else []))
    return base


def _targets(node: ast.AST, module: str, path: Path, modules: dict[str, Path]) -> list[str]:
    """The dotted modules one AST node imports ([] when it imports none)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    if isinstance(node, ast.Import):
        names = []
        for alias in node.names:
            sibling = f"{package}.{alias.name}"  # the sandbox child puts its directory on sys.path
            names.append(sibling if sibling in modules else alias.name)
        return names
    if isinstance(node, ast.ImportFrom):
        base = _from_base(node, package)
        subs = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in modules]
        return subs or [base]
    if isinstance(node, ast.Call):
        literal = _literal_import(node)
        return [literal] if literal else []
    return []


def _named(node: ast.AST, module: str, path: Path, targets: list[str]) -> tuple[str, ...]:
    """Every dotted name one import statement takes: ``module.name`` for each name of a from."""
    if isinstance(node, ast.ImportFrom):
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        base = _from_base(node, package)
        return tuple(f"{base}.{alias.name}" for alias in node.names)
    return tuple(targets)


def imports_in(source: str, module: str, path: Path, modules: dict[str, Path]) -> list[Import]:
    """Every import in ``source``, the text of ``module`` (file ``path``)."""
    lines = source.splitlines()
    found = []
    for node, where in _walk(ast.parse(source, filename=str(path))):
        targets = _targets(node, module, path, modules)
        for target in targets:
            found.append(
                Import(
                    path=path.relative_to(REPO),
                    line=node.lineno,
                    source=module,
                    target=_resolve(target, modules),
                    statement=lines[node.lineno - 1].strip(),
                    where=where,
                    names=_named(node, module, path, targets),
                )
            )
    return found


def read_imports() -> list[Import]:
    """Every import of every module under lang2policy/."""
    modules = module_files()
    found = []
    for module, path in modules.items():
        found += imports_in(path.read_text(encoding="utf-8"), module, path, modules)
    return found


def internal(imports: list[Import]) -> list[Import]:
    """The imports of one lang2policy module by another."""
    return [
        imp
        for imp in imports
        if (imp.target == PKG or imp.target.startswith(PKG + ".")) and imp.target != imp.source
    ]


def is_ros(name: str) -> bool:
    top = name.partition(".")[0]
    return top in ROS_EXACT or top.startswith(ROS_PREFIXES) or top.endswith(ROS_SUFFIXES)


def in_ros_package(module: str) -> bool:
    return module == ROS_PACKAGE or module.startswith(ROS_PACKAGE + ".")


def describe(unit: str, layers: dict[str, tuple[int, str]]) -> str:
    layer, name = layers[unit]
    return f"{unit} (layer {layer}, {name})"


# ------------------------------------------------------------------ cycles
def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def cycle_report(imports: list[Import], key) -> list[str]:
    """One entry per import cycle between the groups ``key(module)``, with its imports."""
    edges: dict[str, set[str]] = defaultdict(set)
    by_edge: dict[tuple[str, str], list[Import]] = defaultdict(list)
    for imp in imports:
        a, b = key(imp.source), key(imp.target)
        if a != b:
            edges[a].add(b)
            by_edge[(a, b)].append(imp)
    report = []
    for component in cycles(edges):
        members = set(component)
        lines = [f"cycle between {', '.join(component)}:"]
        for (a, b), found in sorted(by_edge.items()):
            if a in members and b in members:
                lines += [f"    {a} -> {b}: {imp.at()}" for imp in found]
        report.append("\n".join(lines))
    return report


# ------------------------------------------------------------------ wings
def is_private(name: str) -> bool:
    """Whether a dotted name has a private part (``_x``; ``__init__``-style dunders are not)."""
    return any(part.startswith("_") and not part.endswith("__") for part in name.split("."))


def upward_wing_imports(imports: list[Import], wings: dict[str, int]) -> list[str]:
    """An entry per import of a higher wing of the importer's own package."""
    offenders = []
    for imp in imports:
        source, target = wing_of(imp.source, wings), wing_of(imp.target, wings)
        if source is None or target is None or source == target:
            continue
        if wings[target] > wings[source]:
            offenders.append(
                f"{imp.at()}: wing {source} ({wings[source]}) imports {imp.target}, in wing "
                f"{target} ({wings[target]}) (rule: {RULE_WINGS})"
            )
    return offenders


def private_wing_imports(imports: list[Import], wings: dict[str, int]) -> list[str]:
    """An entry per private name (or module) one wing takes from another."""
    offenders = []
    for imp in imports:
        source = wing_of(imp.source, wings)
        for name in imp.names:
            target = wing_of(name, wings)
            if source is None or target is None or source == target:
                continue
            if is_private(name.removeprefix(f"{PKG}.{target}")):
                offenders.append(
                    f"{imp.at()}: wing {source} takes {name}, private to wing {target} "
                    f"(rule: {RULE_PRIVATE})"
                )
    return sorted(set(offenders))


# ------------------------------------------------------------------ the tests
SAMPLE = """
import importlib
from typing import TYPE_CHECKING

from .. import errors
from ..scene import pose

if TYPE_CHECKING:
    from lang2policy.ros.convert import ObjectPose


def later():
    import rclpy
    return importlib.import_module("lang2policy.graph.nodes")
"""


def test_the_reader_sees_every_kind_of_import():
    """The checks below are only as good as this: every form of import is found, and where."""
    modules = module_files()
    path = PKG_DIR / "control" / "sample.py"
    found = imports_in(SAMPLE, f"{PKG}.control.sample", path, modules)
    seen = {(imp.target, imp.where) for imp in found}
    assert seen == {
        ("importlib", ""),
        ("typing", ""),
        (f"{PKG}.errors", ""),
        (f"{PKG}.scene.pose", ""),
        (f"{PKG}.ros.convert", "under TYPE_CHECKING"),
        ("rclpy", "inside a function"),
        (f"{PKG}.graph.nodes", "inside a function"),
    }, seen
    assert all(str(imp.path).startswith(PKG) and imp.line > 0 for imp in found)


def test_cycles_are_found():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(edges) == [["a", "b", "c"]]


def test_layer_table_names_every_package():
    layers = read_layers()
    units = {unit_of(module, layers) for module in module_files()}
    missing = sorted(
        str(path.relative_to(REPO))
        for module, path in module_files().items()
        if unit_of(module, layers) is None
    )
    assert not missing, (
        "modules in no layer: add their package to " + RULE_TABLE + ":\n  " + "\n  ".join(missing)
    )
    stale = sorted(set(layers) - units)
    assert not stale, f"{RULE_TABLE} names units that do not exist: {stale}"


def test_no_ros_import_outside_the_ros_package():
    imports = read_imports()
    assert any(is_ros(imp.target) and in_ros_package(imp.source) for imp in imports), (
        f"no ROS import found even in {ROS_PACKAGE}: the import reader is broken"
    )
    offenders = [
        f"{imp.at()}: imports ROS package {imp.target.partition('.')[0]!r} outside {ROS_PACKAGE} "
        "(rule: only lang2policy/ros/ and launch/ import rclpy and ROS packages)"
        for imp in imports
        if is_ros(imp.target) and not in_ros_package(imp.source)
    ]
    assert not offenders, f"{len(offenders)} ROS imports in the core:\n" + "\n".join(offenders)


def test_imports_go_downward():
    layers = read_layers()
    offenders = []
    for imp in internal(read_imports()):
        source, target = unit_of(imp.source, layers), unit_of(imp.target, layers)
        if source is None or target is None or source == target:
            continue  # unknown units fail test_layer_table_names_every_package
        if layers[target][0] > layers[source][0]:
            offenders.append(
                f"{imp.at()}: {describe(source, layers)} imports {imp.target}, in "
                f"{describe(target, layers)} (rule: {RULE_LAYERS})"
            )
    assert not offenders, f"{len(offenders)} upward imports:\n" + "\n".join(offenders)


def test_leaf_parents_import_nothing_higher():
    """Importing a submodule runs its packages' __init__.py: they must be as low as it is."""
    layers = read_layers()
    leaves = {unit: layer for unit, (layer, _) in layers.items() if "." in unit}
    offenders = []
    for imp in internal(read_imports()):
        if imp.path.name != "__init__.py":
            continue
        target = unit_of(imp.target, layers)
        for leaf, layer in leaves.items():
            if not f"{PKG}.{leaf}".startswith(imp.source + "."):
                continue
            if target is not None and layers[target][0] > layer:
                offenders.append(
                    f"{imp.at()}: imports {imp.target}, in {describe(target, layers)}, but "
                    f"importing {leaf} (layer {layer}) runs this file (rule: the packages of a "
                    f"lower-layer submodule import nothing above its layer)"
                )
    assert not offenders, "\n".join(offenders)


def test_no_import_cycle_between_packages():
    layers = read_layers()
    report = cycle_report(internal(read_imports()), lambda m: unit_of(m, layers) or m)
    assert not report, (
        f"{len(report)} import cycles between packages (rule: no two packages import each "
        "other, even within one layer):\n" + "\n".join(report)
    )


def test_no_import_cycle_between_modules():
    report = cycle_report(internal(read_imports()), lambda m: m)
    assert not report, (
        f"{len(report)} import cycles between modules (rule: no module imports, even lazily or "
        "for type checking, a module that imports it back):\n" + "\n".join(report)
    )


WING_SAMPLE = """
from lang2policy.vla.spec import tasks
from lang2policy.vla.sim.oracle import _helper
from lang2policy.vla.spec.tasks import SIDES, _hidden


def later():
    from lang2policy.vla.skill.runner import Step
    import lang2policy.vla.model._private_module
"""


def test_the_wing_checks_see_an_upward_import_and_a_private_name():
    """The wing rules are only as good as this: a breach of each is found, and nothing else."""
    wings = read_wings()
    modules = module_files()
    path = PKG_DIR / "vla" / "data" / "sample.py"
    found = imports_in(WING_SAMPLE, f"{PKG}.vla.sim.sample", path, modules)
    upward = upward_wing_imports(internal(found), wings)
    assert [line.partition(": wing")[0] for line in upward] == [
        f"{path.relative_to(REPO)}:8: `from lang2policy.vla.skill.runner import Step` "
        "(inside a function)",
        f"{path.relative_to(REPO)}:9: `import lang2policy.vla.model._private_module` "
        "(inside a function)",
    ], upward
    private = private_wing_imports(internal(found), wings)
    assert len(private) == 2, private
    assert "vla.spec.tasks._hidden, private to wing vla.spec" in private[0], private
    assert "vla.model._private_module, private to wing vla.model" in private[1], private


def test_wing_table_names_every_module():
    wings = read_wings()
    modules = module_files()
    layers = read_layers()
    for package in winged_packages(wings):
        assert package in layers, f"{RULE_WING_TABLE}: {package!r} is not a unit of {RULE_TABLE}"
    packages = tuple(f"{PKG}.{package}." for package in winged_packages(wings))
    missing = sorted(
        str(path.relative_to(REPO))
        for module, path in modules.items()
        if module.startswith(packages) and wing_of(module, wings) is None
    )
    assert not missing, (
        "modules in no wing of their package: add a wing to " + RULE_WING_TABLE + ":\n  "
        + "\n  ".join(missing)
    )
    stale = sorted(wing for wing in wings if f"{PKG}.{wing}" not in modules)
    assert not stale, f"{RULE_WING_TABLE} names wings that do not exist: {stale}"


def test_wings_import_downward():
    wings = read_wings()
    imports = internal(read_imports())
    assert any(wing_of(imp.source, wings) for imp in imports), "no import from a wing found"
    offenders = upward_wing_imports(imports, wings)
    offenders += [
        f"{imp.at()}: the package's __init__.py imports {imp.target} (rule: importing one wing "
        "must not import the others)"
        for imp in imports
        if imp.source.removeprefix(f"{PKG}.") in winged_packages(wings)
        and wing_of(imp.target, wings) is not None
    ]
    assert not offenders, f"{len(offenders)} upward imports between wings:\n" + "\n".join(
        offenders
    )


def test_no_wing_imports_another_wings_private_names():
    wings = read_wings()
    offenders = private_wing_imports(internal(read_imports()), wings)
    assert not offenders, f"{len(offenders)} private names across wings:\n" + "\n".join(
        offenders
    )
