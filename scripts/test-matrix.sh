#!/usr/bin/env bash
# Test every supported ansible-core release, each in its own venv under .cache/matrix:
# the unit tests and the end-to-end smoke of the three passes on both
# backends (tests/integration/test_smoke.py, JSON callback); `ansible-test sanity` on the
# oldest and the newest release (make test runs it too, on the default venv's 2.21). Keep MATRIX in step with requires_ansible in
# meta/runtime.yml (tests/unit/test_repository.py checks that).
#   MATRIX="2.18:3.11 2.21:3.13" scripts/test-matrix.sh   # a subset
#   SKIP_DEFAULT_VENV=1 scripts/test-matrix.sh   # leave out the release `make test` just ran
#     on the same Python in .venv (what .ci/run does: the same tests twice prove nothing more)
set -euo pipefail
cd "$(dirname "$0")/.."
MATRIX=${MATRIX:-"2.18:3.11 2.19:3.11 2.20:3.12 2.21:3.13"}
SANITY=${SANITY:-"$(echo "$MATRIX" | awk '{print $1; if (NF > 1) print $NF}' | cut -d: -f1 | tr '\n' ' ')"}
WORKERS=${PYTEST_WORKERS:-2}
export ANSIBLE_NOCOLOR=1
export ANSIBLE_COLLECTIONS_PATH="$PWD/.cache/collections"
mkdir -p .cache/collections/ansible_collections/waldur
ln -sfn "$PWD" .cache/collections/ansible_collections/waldur/site_agent

default_release=""
if [ "${SKIP_DEFAULT_VENV:-0}" = 1 ] && [ -x .venv/bin/python ]; then
  default_release=$(.venv/bin/python -c 'import ansible, sys; print("%s:%d.%d" % (ansible.__version__.rsplit(".", 1)[0], *sys.version_info[:2]))')
fi
summary=()
for entry in $MATRIX; do
  core=${entry%%:*} python_version=${entry##*:}
  if [ "$entry" = "$default_release" ]; then
    echo "== ansible-core $core on Python $python_version: make test ran it in .venv (unit, sanity, integration)"
    summary+=("ansible-core $core: in make test")
    continue
  fi
  started=$SECONDS
  venv=.cache/matrix/ansible-core-$core
  stamp=$venv/.installed
  if [ ! -f "$stamp" ] || [ requirements.txt -nt "$stamp" ] || [ tests/requirements-matrix.txt -nt "$stamp" ]; then
    python=$(scripts/find-python.sh "$python_version")
    echo "== ansible-core $core: venv on $python"
    rm -rf "$venv"
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check -r requirements.txt \
      -r tests/requirements-matrix.txt "ansible-core==$core.*" 2>&1 | { grep -v "is ignored" || true; }
    touch "$stamp"
  fi
  echo "== ansible-core $("$venv/bin/python" -c 'import ansible; print(ansible.__version__)') on Python $python_version"
  # The rulebook tests need ansible-rulebook and the bench smoke matplotlib; neither
  # depends on ansible-core, and make test runs both. So do the contract tests (the simulators
  # and the SDKs against the vendored OpenAPI specs), which no ansible-core release changes.
  "$venv/bin/python" -m pytest tests/unit tests/integration/test_smoke.py -q -n "$WORKERS" \
    --ignore=tests/unit/eda/test_eda_content.py --ignore=tests/unit/eda/test_rulebooks_schema.py \
    --ignore=tests/unit/test_bench_smoke.py
  case " $SANITY " in
    *" $core "*) VENV=$venv scripts/sanity.sh ;;
  esac
  summary+=("ansible-core $core: $((SECONDS - started)) s")
done
printf '%s\n' "== test-matrix passed:" "${summary[@]}"
