#!/usr/bin/env bash
# Set up (idempotent), then render the demo video to out/demo.mp4.
# Extra arguments are passed to `lang2policy demo`.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

bash scripts/setup.sh

export MUJOCO_GL="${MUJOCO_GL:-egl}"
export ROS_AUTOMATIC_DISCOVERY_RANGE="${ROS_AUTOMATIC_DISCOVERY_RANGE:-LOCALHOST}"
export ROS_DOMAIN_ID="${ROS_DOMAIN_ID:-$(( RANDOM % 100 + 1 ))}"

mkdir -p out
echo "[demo] .venv/bin/lang2policy demo --out out/demo.mp4 $*"
.venv/bin/lang2policy demo --out out/demo.mp4 "$@"
echo "[demo] wrote $ROOT/out/demo.mp4"
