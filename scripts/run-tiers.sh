#!/usr/bin/env bash
# Run make targets one after another (the tiers of `make test`), stop at the first that
# fails, and print how long each took either way.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
times=() status=0
for tier in "$@"; do
  started=$SECONDS
  make --no-print-directory "$tier"
  status=$?
  times+=("$(printf '%-12s %5d s%s' "$tier" $((SECONDS - started)) "$([ $status -ne 0 ] && echo '  FAILED')")")
  [ $status -eq 0 ] || break
done
printf '\n== tier times\n'
printf '%s\n' "${times[@]}"
exit $status
