#!/usr/bin/env bash
# Run `ansible-test sanity` on a copy of the collection laid out as
# ansible_collections/waldur/site_agent (ansible-test needs that path and skips
# symlinked trees). Offline: ansible-test's pip bootstrap script is replaced by
# one that uses ensurepip, then installs the pinned packages from the index.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=$(cd "${VENV:-.venv}" && pwd)  # absolute: the run below changes directory
PYTHON_VERSION=$("$VENV/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')

cache="$HOME/.ansible/test/cache"
mkdir -p "$cache"
pip_version=$("$VENV/bin/python" - <<'PY'
import inspect, re
from ansible_test._internal import python_requirements as pr
print(re.search(r"pip='([0-9.]+)'", inspect.getsource(pr.get_venv_packages)).group(1))
PY
)
shim="$cache/get_pip_${pip_version//./_}.py"
if [ ! -s "$shim" ] || ! grep -q "get-pip.py.s own options" "$shim"; then
  cat > "$shim" <<'PY'
# Stand-in for get-pip.py (its download host is unreachable here): bootstrap pip
# with ensurepip, then install what ansible-test asked for from the package index.
import subprocess
import sys

subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"], stdout=subprocess.DEVNULL)
# --no-setuptools/--no-wheel are get-pip.py's own options, not pip's.
args = [arg for arg in sys.argv[1:] if arg not in ("--no-setuptools", "--no-wheel")]
subprocess.check_call([sys.executable, "-m", "pip", "install", "-q"] + args)
PY
fi

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
