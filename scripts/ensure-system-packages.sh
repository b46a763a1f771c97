#!/usr/bin/env bash
# Install the system packages the tests need when they are missing (Debian/Ubuntu):
#   systemd - systemd-analyze, which verifies the units of the schedule role.
# Quiet and idempotent: does nothing when every command is present.
set -euo pipefail

# command -> Debian package providing it
declare -A needed=(
  [systemd-analyze]=systemd
)

missing=()
for command in "${!needed[@]}"; do
  command -v "$command" >/dev/null 2>&1 || missing+=("${needed[$command]}")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-system-packages: install ${missing[*]} (no apt-get here)" >&2
  exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "ensure-system-packages: run as root to install ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
{
  $sudo apt-get update -qq &&
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
} > "$log" 2>&1 || { cat "$log" >&2; exit 1; }
