#!/usr/bin/env bash
# The live LeRobot checks, before each release: LeRobot's own code against ours.
#
#   bash scripts/lerobot_check.sh
#
# Builds LeRobot's environment once (scripts/lerobot_env.sh: .venv-lerobot, Python 3.12,
# LeRobot 0.6.1, about 2 minutes and 5 GB), then runs test/vla/test_lerobot_live.py: LeRobot loads
# `record demos` and `dataset from-mcap` output; an ACT trained by lerobot-train takes no
# simulator-only input; LeRobot's writer makes a dataset our reader converts to the simulator's
# radians; LeRobot's real policy server answers our lerobot:// backend and drives the simulated
# arm through the VLA and safety nodes; the wire codec still matches LeRobot's classes. CI
# runs the same paths against fixtures LeRobot's code recorded (test/fixtures/lerobot*/).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
start=$(date +%s)
bash scripts/setup.sh
bash scripts/lerobot_env.sh
export MUJOCO_GL="${MUJOCO_GL:-egl}" ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
export ROS_DOMAIN_ID="${ROS_DOMAIN_ID:-$(( RANDOM % 100 + 1 ))}"
.venv/bin/python -m pytest -q -p no:cacheprovider test/vla/test_lerobot_live.py "$@"
echo "[lerobot-check] passed in $(( $(date +%s) - start )) s"
