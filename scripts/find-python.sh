#!/usr/bin/env bash
# Print the path of a Python interpreter of the given minor version (e.g. 3.13), or of the
# newest of several ("3.13 3.12"): one on PATH that runs, else one installed by pyenv.
# Exits non-zero, naming what it looked for, when none is found.
set -euo pipefail
for version in "$@"; do
  if command -v "python$version" >/dev/null 2>&1 && "python$version" -c '' >/dev/null 2>&1; then
    command -v "python$version"; exit 0
  fi
  root=$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")
  for candidate in "$root"/versions/"$version"*/bin/python"$version"; do
    if [ -x "$candidate" ] && "$candidate" -c '' >/dev/null 2>&1; then
      echo "$candidate"; exit 0
    fi
  done
done
echo "find-python: no Python $* found on PATH or under pyenv; install one or set PYTHON=" >&2
exit 1
