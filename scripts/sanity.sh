#!/usr/bin/env bash
# Run `ansible-test sanity` on a copy of the collection laid out as
# ansible_collections/waldur/site_agent (ansible-test needs that path and skips
# symlinked trees). Offline: ansible-test's pip bootstrap script is replaced by
# one that uses ensurepip, then installs the pinned packages from the index
# (scripts/ansible-test-pip-shim.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=$(cd "${VENV:-.venv}" && pwd)  # absolute: the run below changes directory
PYTHON_VERSION=$("$VENV/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')

VENV="$VENV" scripts/ansible-test-pip-shim.sh

work=.cache/sanity
dest=$work/ansible_collections/waldur/site_agent
rm -rf "$dest"
mkdir -p "$dest"
# Tracked files plus new ones not ignored: what the next commit would hold.
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
  [ -e "$f" ] || continue
  mkdir -p "$dest/$(dirname "$f")"
  cp -p "$f" "$dest/$f"
done
cd "$dest"
git init -q . && git add -A >/dev/null  # ansible-test uses git to list the files
export PATH="$VENV/bin:$PATH"
exec ansible-test sanity --python "$PYTHON_VERSION" --color no "$@"
