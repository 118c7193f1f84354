#!/usr/bin/env bash
# Type-check the core packages with mypy.
#
#   bash scripts/check_types.sh
#
# What is checked, and how, is [tool.mypy] in pyproject.toml: the packages it lists
# (conductor, safety, sandbox, rewards, planning), with the modules they import from the rest
# of lang2policy analysed for their types but not reported on. Widen the check by adding a
# package there once this script is clean on it. mypy and the stub packages are pinned in
# requirements-dev.txt. Prints one OK line with the number of files checked, or mypy's errors.
# Exits non-zero on any error. Needs .venv (setup.sh).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

MYPY=.venv/bin/mypy

fail() { printf '[types] FAILED: %s\n' "$*" >&2; exit 1; }

[[ -x "$MYPY" ]] || fail "$MYPY is missing: run bash scripts/setup.sh (mypy is pinned in requirements-dev.txt)"

rc=0
log=$("$MYPY" --config-file pyproject.toml 2>&1) || rc=$?
if [[ $rc -ne 0 ]]; then
    printf '%s\n' "$log" >&2
    fail "mypy exit $rc (fix the errors above; [tool.mypy] in pyproject.toml says what is checked)"
fi
# mypy's summary: "Success: no issues found in N source files"
files=$(sed -n 's/^Success: no issues found in \([0-9]*\) source files\{0,1\}$/\1/p' <<<"$log")
[[ -n "$files" ]] || fail "mypy passed but printed no summary: $log"
echo "[types] OK: mypy $("$MYPY" --version | awk '{print $2}') clean on $files files ([tool.mypy] in pyproject.toml)"
