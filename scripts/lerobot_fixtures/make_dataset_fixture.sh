#!/usr/bin/env bash
# Regenerate test/fixtures/lerobot/so101_sweep/: a dataset written by LeRobot's own writer
# (2 episodes x 20 frames, 640x480 front camera, 30 fps, degrees), and its truth in our units.
# Needs both environments: .venv (scripts/setup.sh) and .venv-lerobot (scripts/lerobot_env.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
FIXTURES=test/fixtures/lerobot
frames=$(mktemp --suffix=.npz)
trap 'rm -f "$frames"' EXIT
MUJOCO_GL=${MUJOCO_GL:-egl} .venv/bin/python scripts/lerobot_fixtures/render_arm_frames.py \
    --out "$frames" --episodes 2 --frames 20
HF_HUB_OFFLINE=1 .venv-lerobot/bin/python scripts/lerobot_fixtures/write_dataset.py \
    "$frames" "$FIXTURES/so101_sweep"
.venv/bin/python - "$frames" "$FIXTURES/so101_sweep_truth.npz" <<'PY'
import sys
import numpy as np
data = np.load(sys.argv[1])
np.savez_compressed(sys.argv[2], **{k: data[k] for k in ("state_rad", "action_rad", "fps")})
PY
du -sh "$FIXTURES/so101_sweep" "$FIXTURES/so101_sweep_truth.npz"
