#!/usr/bin/env bash
# Set up (idempotent), then run the test suite and the linter.
#
#   bash scripts/test.sh                 # everything
#   bash scripts/test.sh -m "not slow"   # extra arguments go to pytest
#   bash scripts/test.sh test/project/test_colcon_build.py -x
#
# Then scripts/check_py312.sh: the core package on Python 3.12 (.venv-py312, no ROS/torch),
# scripts/check_docs.sh: the docs site built with mkdocs --strict, the README's length and links,
# and scripts/check_types.sh: mypy on the core packages ([tool.mypy] in pyproject.toml).
# Exits non-zero if pytest, ruff, the Python 3.12 check, the docs check or the type check fails
# (all five always run).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

bash scripts/setup.sh

# Headless rendering on the CPU (Mesa llvmpipe) unless the caller chose another backend.
export MUJOCO_GL="${MUJOCO_GL:-egl}"
# Keep ROS 2 traffic on this machine and away from other runs: a random domain per run.
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
export ROS_DOMAIN_ID="${ROS_DOMAIN_ID:-$(( RANDOM % 100 + 1 ))}"

echo "[test] MUJOCO_GL=$MUJOCO_GL ROS_DOMAIN_ID=$ROS_DOMAIN_ID" \
     "ROS_AUTOMATIC_DISCOVERY_RANGE=$ROS_AUTOMATIC_DISCOVERY_RANGE"

pytest_rc=0
.venv/bin/python -m pytest -q "$@" || pytest_rc=$?

echo "[test] ruff check"
ruff_rc=0
.venv/bin/ruff check . || ruff_rc=$?

echo "[test] Python 3.12 check (scripts/check_py312.sh)"
py312_rc=0
bash scripts/check_py312.sh || py312_rc=$?

echo "[test] docs check (scripts/check_docs.sh)"
docs_rc=0
bash scripts/check_docs.sh || docs_rc=$?

echo "[test] type check (scripts/check_types.sh)"
types_rc=0
bash scripts/check_types.sh || types_rc=$?

if [[ $pytest_rc -ne 0 || $ruff_rc -ne 0 || $py312_rc -ne 0 || $docs_rc -ne 0 \
      || $types_rc -ne 0 ]]; then
    echo "[test] FAILED (pytest exit $pytest_rc, ruff exit $ruff_rc, py312 exit $py312_rc," \
         "docs exit $docs_rc, types exit $types_rc)" >&2
    exit 1
fi
echo "[test] all passed"
