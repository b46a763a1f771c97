#!/usr/bin/env bash
# Cut a release of the waldur.site_agent collection:
#   scripts/release.sh [--commit] [--dist DIR] [--summary TEXT] <version>
#
# Bumps `version:` in galaxy.yml, turns the changelog fragments into the release
# (changelogs/changelog.yaml and CHANGELOG.rst, via antsibull-changelog) and builds
# DIR/waldur-site_agent-<version>.tar.gz (DIR defaults to dist). Refuses a working tree
# with uncommitted changes, a version that is not semver or not newer than the current one.
# --summary adds TEXT as the release summary. Commits and tags only with --commit;
# otherwise prints the commands. See docs/releasing.md.
set -euo pipefail

usage() {
  if [ "${1:-2}" = 0 ]; then
    sed -n '2,10s/^# \{0,1\}//p' "$0"
  else
    sed -n '2,10s/^# \{0,1\}//p' "$0" >&2
  fi
  exit "${1:-2}"
}

commit=false
dist=dist
summary=""
version=""
while [ $# -gt 0 ]; do
  case "$1" in
    --commit) commit=true ;;
    --dist) [ $# -ge 2 ] || usage; dist=$2; shift ;;
    --dist=*) dist=${1#--dist=} ;;
    --summary) [ $# -ge 2 ] || usage; summary=$2; shift ;;
    --summary=*) summary=${1#--summary=} ;;
    -h|--help) usage 0 ;;
    -*) echo "release.sh: unknown option $1" >&2; usage ;;
    *) [ -z "$version" ] || usage; version=$1 ;;
  esac
  shift
done
[ -n "$version" ] || usage

cd "$(dirname "$0")/.."

# Tools from the project's venv when there is one (VENV overrides), else from PATH. The venv
# goes first on PATH too: antsibull-changelog runs ansible-doc to list the new plugins.
VENV=${VENV:-.venv}
if [ -d "$VENV/bin" ]; then
  PATH="$(cd "$VENV/bin" && pwd):$PATH"
  export PATH
fi
tool() {
  command -v "$1" || { echo "release.sh: $1 not found (make venv)" >&2; exit 1; }
}
antsibull_changelog=$(tool antsibull-changelog)
ansible_galaxy=$(tool ansible-galaxy)
python=$(tool python3)

# Semantic Versioning 2.0.0, as Galaxy requires: MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD].
semver='^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)(\.(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*))*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$'
if ! printf '%s' "$version" | grep -Eq "$semver"; then
  echo "release.sh: '$version' is not a semantic version (MAJOR.MINOR.PATCH, e.g. 1.2.0 or 1.2.0-rc.1)" >&2
  exit 2
fi

git rev-parse --is-inside-work-tree >/dev/null 2>&1 || { echo "release.sh: $(pwd) is not a git working tree" >&2; exit 1; }
dirty=$(git status --porcelain --untracked-files=normal)
if [ -n "$dirty" ]; then
  echo "release.sh: refusing to release from a working tree with uncommitted changes:" >&2
  printf '%s\n' "$dirty" | sed 's/^/  /' >&2
  exit 1
fi

current=$(sed -n 's/^version:[[:space:]]*//p' galaxy.yml | tr -d "\"'")
[ -n "$current" ] || { echo "release.sh: no version: line in galaxy.yml" >&2; exit 1; }
newer=$("$python" - "$current" "$version" <<'PY'
import sys
from ansible.utils.version import SemanticVersion
current, new = (SemanticVersion(v) for v in sys.argv[1:])
print("yes" if new > current else "no")
PY
)
if [ "$newer" != yes ]; then
  echo "release.sh: $version is not newer than the current version $current" >&2
  exit 1
fi
if git rev-parse -q --verify "refs/tags/$version" >/dev/null; then
  echo "release.sh: tag $version exists already" >&2
  exit 1
fi

# From here on files change: say which step failed and how to undo.
step=""
trap 'echo "release.sh: $step failed; undo the changes with: git checkout -- . && git clean -fd changelogs" >&2' ERR

if [ -n "$summary" ]; then
  step="writing the release summary"
  "$python" - "changelogs/fragments/release_summary_$version.yml" "$summary" <<'PY'
import sys
import yaml
with open(sys.argv[1], "w") as handle:
    yaml.safe_dump({"release_summary": sys.argv[2]}, handle, default_flow_style=False, explicit_start=True)
PY
fi
step="antsibull-changelog lint"
"$antsibull_changelog" lint
step="setting the version in galaxy.yml"
sed -i.bak -E "s/^version:[[:space:]]*.*/version: $version/" galaxy.yml && rm -f galaxy.yml.bak
# It reads every plugin's documentation (ansible-doc) to list the new ones; add -v to see why it fails.
step="antsibull-changelog release --version $version"
"$antsibull_changelog" release --version "$version"

step="ansible-galaxy collection build"
mkdir -p "$dist"
# dist holds the current build only, so an execution environment build picks exactly one tarball.
rm -f "$dist"/waldur-site_agent-*.tar.gz
"$ansible_galaxy" collection build --output-path "$dist" >/dev/null
tarball="$dist/waldur-site_agent-$version.tar.gz"
[ -f "$tarball" ] || { echo "release.sh: $tarball was not built" >&2; exit 1; }
trap - ERR

echo "Release $version prepared: galaxy.yml, CHANGELOG.rst, changelogs/ updated; built $tarball"
if $commit; then
  git add -A galaxy.yml CHANGELOG.rst changelogs
  git commit -q -m "Release $version"
  git tag -a "$version" -m "waldur.site_agent $version"
  echo "Committed and tagged $version. Publish with:"
else
  echo "Review the changes (git diff), then commit, tag and publish:"
  echo "  git add -A galaxy.yml CHANGELOG.rst changelogs"
  echo "  git commit -m \"Release $version\""
  echo "  git tag -a $version -m \"waldur.site_agent $version\""
fi
echo "  git push origin HEAD --tags"
echo "  ansible-galaxy collection publish $tarball"
