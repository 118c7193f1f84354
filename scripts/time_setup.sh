#!/usr/bin/env bash
# How long a fresh machine takes to set up and run the demo: `bash scripts/demo.sh` in a new
# clone of REV with a new, empty pip cache (nothing built or downloaded before), wall time.
# With a BASELINE revision, that one is timed too, in the same run, one after the other, so
# the two figures share the machine's state (network, load).
#
#   bash scripts/time_setup.sh [REV [BASELINE]]     # REV default HEAD
#
# Prints one line per revision: its wall time, and the load average before and after; each
# run's log (setup's phases with their times) is kept in /tmp/l2p-setup-time-REV.log. The
# clones and caches live under a temporary folder, removed at the end.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK="$(mktemp -d /tmp/l2p-setup-time.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT

time_one() {  # time_one REV: set up and run the demo in a fresh clone; prints the figure
    local rev="$1" dir="$WORK/clone-$1" started load_before status=0
    git clone -q "$ROOT" "$dir"
    git -C "$dir" checkout -q "$rev"
    load_before=$(cut -d' ' -f1-3 /proc/loadavg)
    started=$(date +%s)
    ( cd "$dir" && PIP_CACHE_DIR="$WORK/pip-cache-$rev" bash scripts/demo.sh ) \
        > "$WORK/$rev.log" 2>&1 || status=$?
    local took=$(( $(date +%s) - started ))
    printf '[time_setup] %s (%s): %d min %02d s, status %d; load before %s, after %s\n' \
        "$rev" "$(git -C "$dir" log -1 --format=%h)" $(( took / 60 )) $(( took % 60 )) \
        "$status" "$load_before" "$(cut -d' ' -f1-3 /proc/loadavg)"
    cp "$WORK/$rev.log" "/tmp/l2p-setup-time-$rev.log"
    [[ $status -eq 0 ]] || tail -n 20 "$WORK/$rev.log" >&2
}

time_one "${1:-HEAD}"
[[ -z "${2:-}" ]] || time_one "$2"
