#!/usr/bin/env bash
# Offline stand-in for ansible-test's pip bootstrap script (get-pip.py, whose download host
# may be unreachable): bootstrap pip with ensurepip, then install what ansible-test asked
# for from the package index. Written once into ansible-test's cache for the pip version
# of the ansible-test in $VENV (default .venv); scripts/sanity.sh and the test of the
# installed artifact (tests/integration/test_build_install.py) run it first.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=$(cd "${VENV:-.venv}" && pwd)
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

