#!/usr/bin/env bash
# Check the documentation: the site builds, the README stays a front page, its links hold.
#
#   bash scripts/check_docs.sh
#
#   1. `mkdocs build --strict` of docs/ (mkdocs.yml): any broken link or anchor between pages,
#      or a page missing from the nav, fails the build;
#   2. README.md has at most 300 lines;
#   3. every relative link in README.md into docs/ (docs/vla.md, docs/vla.md#anchor) names a
#      page that exists and, with an anchor, a heading that the built page has.
# Prints one OK line, or what failed. Exits non-zero on any failure. Needs .venv (setup.sh).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

MAX_README_LINES=300
MKDOCS=.venv/bin/mkdocs

fail() { printf '[docs] FAILED: %s\n' "$*" >&2; exit 1; }

[[ -x "$MKDOCS" ]] || fail "$MKDOCS is missing: run bash scripts/setup.sh (mkdocs is pinned in requirements-dev.txt)"

SITE="$(mktemp -d)"
trap 'rm -rf "$SITE"' EXIT

# 1. the site, strictly (warnings are errors)
if ! log=$("$MKDOCS" build --strict --site-dir "$SITE" 2>&1); then
    printf '%s\n' "$log" >&2
    fail "mkdocs build --strict (fix the warnings above)"
fi

# 2. the README is a front page
lines=$(wc -l < README.md)
((lines <= MAX_README_LINES)) || fail "README.md has $lines lines (at most $MAX_README_LINES): move the detail to docs/"

# 3. the README's links into docs/: the page exists, and its anchor is in the built page
bad=$(.venv/bin/python - "$SITE" <<'EOF'
import re
import sys
from pathlib import Path

site = Path(sys.argv[1])
text = Path("README.md").read_text(encoding="utf-8")
problems = []
for target in re.findall(r"\]\((docs/[^)\s]+)\)", text):
    page, _, anchor = target.partition("#")
    if not Path(page).is_file():
        problems.append(f"{target}: {page} does not exist")
        continue
    if not anchor:
        continue
    if not page.endswith(".md"):
        problems.append(f"{target}: an anchor into a file that is not a docs page")
        continue
    stem = Path(page).relative_to("docs").with_suffix("")
    built = site / "index.html" if stem.as_posix() == "index" else site / stem / "index.html"
    if not built.is_file() or f'id="{anchor}"' not in built.read_text(encoding="utf-8"):
        problems.append(f"{target}: {page} has no heading with the anchor #{anchor}")
print("\n".join(problems))
EOF
)
[[ -z "$bad" ]] || fail "README.md links into docs/ that do not resolve:
$bad"

pages=$(find docs -name '*.md' | wc -l)
echo "[docs] OK: $pages pages built with mkdocs --strict, README.md $lines lines, its links into docs/ resolve"
