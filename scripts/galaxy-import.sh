#!/usr/bin/env bash
# Build the collection as `ansible-galaxy collection build` does from this checkout and run
# galaxy-importer on the tarball: the checks Galaxy and Automation Hub run when it is
# published (the collection's layout, MANIFEST and FILES, every plugin's documentation
# through ansible-doc, the role READMEs, the changelog). It fails on a failed import and on
# any ERROR line the importer logs (it logs some errors, an unreadable DOCUMENTATION for one,
# without failing). ansible-lint is left to `make lint` (it runs on the source) and
# ansible-test to `make sanity` (tests/galaxy-importer.cfg), which keeps this tier short.
#   scripts/galaxy-import.sh [DIR]    # DIR keeps the tarball and the log (default: a temp dir)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=$(cd "${VENV:-.venv}" && pwd)
if [ $# -gt 0 ]; then
  work=$1
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work"
work=$(cd "$work" && pwd)
rm -f "$work"/waldur-site_agent-*.tar.gz
"$VENV/bin/ansible-galaxy" collection build --output-path "$work" > /dev/null
tarball=$(ls "$work"/waldur-site_agent-*.tar.gz)
status=0
(
  cd "$work"
  export PATH="$VENV/bin:$PATH" GALAXY_IMPORTER_CONFIG="$OLDPWD/tests/galaxy-importer.cfg"
  "$VENV/bin/python" -m galaxy_importer.main "$tarball"
) > "$work/galaxy-importer.log" 2>&1 || status=$?
if [ "$status" -ne 0 ] || grep -q '^ERROR' "$work/galaxy-importer.log"; then
  cat "$work/galaxy-importer.log" >&2
  echo "galaxy-import: the import of $(basename "$tarball") failed (log above)" >&2
  exit 1
fi
grep -E '^(WARNING|ERROR)' "$work/galaxy-importer.log" || true
echo "galaxy-import: $(basename "$tarball") imports cleanly"
