#!/usr/bin/env bash
# Create LeRobot's own environment beside ours, once: .venv-lerobot/ on Python 3.12.
#
#   bash scripts/lerobot_env.sh            # create (no-op when it already works)
#   bash scripts/lerobot_env.sh --force    # recreate from scratch
#
# Why a second environment: LeRobot 0.6 needs Python >= 3.12 and torch < 2.12; our .venv is
# Python 3.11 (the ROS 2 wheels' cp311 build) with torch 2.13. The two never share a process:
# we exchange files (LeRobot datasets, calibration JSON) and a protocol (LeRobot's gRPC policy
# server, started by `lang2policy vla-serve --lerobot CKPT`).
#
# Cost: pip resolves LeRobot's pins from PyPI; on x86_64 that includes a CUDA build of torch
# (about 3 GB of downloads, 5-15 minutes on a good link). The script prints how long it took.
# Python 3.12 is found as $PYTHON312, python3.12 on PATH, or pyenv's newest 3.12.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${LEROBOT_VENV:-$ROOT/.venv-lerobot}"
LEROBOT_PIN="lerobot[async,training]==0.6.1"
FORCE=0
for arg in "$@"; do
    case "$arg" in
        --force) FORCE=1 ;;
        -h|--help) sed -n '2,14p' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) echo "lerobot_env.sh: unknown argument: $arg" >&2; exit 2 ;;
    esac
done

say() { printf '[lerobot-env] %s\n' "$*"; }
die() { printf '[lerobot-env] ERROR: %s\n' "$*" >&2; exit 1; }

is_py312() { "$1" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' 2>/dev/null; }

find_python312() {
    local cand
    for cand in "${PYTHON312:-}" python3.12; do
        [[ -n "$cand" ]] && command -v "$cand" >/dev/null && is_py312 "$cand" \
            && { command -v "$cand"; return 0; }
    done
    if command -v pyenv >/dev/null; then
        cand="$(pyenv root)/versions/$(pyenv versions --bare | grep -E '^3\.12(\.|$)' | sort -V | tail -1)/bin/python3.12"
        [[ -x "$cand" ]] && is_py312 "$cand" && { echo "$cand"; return 0; }
    fi
    return 1
}

works() { "$VENV/bin/python" -c "import lerobot, grpc, lerobot.datasets, lerobot.async_inference.policy_server, accelerate; print(lerobot.__version__)" 2>/dev/null; }

if [[ $FORCE -eq 0 && -x "$VENV/bin/python" ]] && version=$(works); then
    say "LeRobot $version is ready in $VENV (--force to recreate)"
    exit 0
fi
PY312=$(find_python312) \
    || die "Python 3.12 not found: set PYTHON312=/path/to/python3.12 (LeRobot 0.6 needs >= 3.12)"
start=$(date +%s)
rm -rf "$VENV"
say "creating $VENV with $PY312"
"$PY312" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
say "installing $LEROBOT_PIN (LeRobot's own torch pin; several GB on x86_64, once)"
"$VENV/bin/python" -m pip install -q "$LEROBOT_PIN"
version=$(works) || die "LeRobot did not import after the install"
say "done: LeRobot $version in $VENV, $(( $(date +%s) - start )) s"
