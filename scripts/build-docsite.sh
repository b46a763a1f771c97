#!/usr/bin/env bash
# make docs: the collection's docsite, as antsibull-docs builds it for docs.ansible.com, in
# .cache/docsite/build/html. antsibull-docs first lints every plugin's and role's documentation
# (references such as M(), O() and RV() that name nothing fail it); then Sphinx builds the site,
# and any warning fails the build, except the references into Ansible's own documentation
# (docs.ansible.com's labels and ANSIBLE_* variables), which only intersphinx resolves: this
# machine reaches no such inventory, so they are listed and let through, nothing else.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=$(cd "${VENV:-.venv}" && pwd)
export PATH="$VENV/bin:$PATH"
export ANSIBLE_COLLECTIONS_PATH="${ANSIBLE_COLLECTIONS_PATH:-$PWD/.cache/collections}"
site=.cache/docsite
rm -rf "$site"
mkdir -p "$site"
antsibull-docs lint-collection-docs --plugin-docs --skip-rstcheck .
antsibull-docs sphinx-init --use-current --dest-dir "$site" waldur.site_agent >/dev/null
# offline: no inventory of other sites to fetch (each attempt costs a timeout)
printf '\nintersphinx_mapping = {}\n' >> "$site/conf.py"
mkdir -p "$site/rst"
chmod og-w "$site/rst"
antsibull-docs --config-file "$site/antsibull-docs.cfg" collection --cleanup everything --use-current \
  --dest-dir "$site/rst" waldur.site_agent >/dev/null
status=0
sphinx-build -M html "$site/rst" "$site/build" -c "$site" -q -w "$site/warnings.log" --keep-going \
  2>"$site/sphinx.log" || status=$?
if [ "$status" -ne 0 ] && ! grep -q WARNING "$site/warnings.log"; then cat "$site/sphinx.log" >&2; fi
# what only Ansible's own documentation defines (resolved by intersphinx on docs.ansible.com)
external="undefined label: '(action_plugins|callback_plugins|inventory_plugins|common_return_values|ansible_configuration_settings)'|'envvar' reference target not found: ANSIBLE_[A-Z_]+"
if grep -Ev "$external" "$site/warnings.log" | grep -q WARNING; then
  echo "docsite warnings:" >&2
  grep -Ev "$external" "$site/warnings.log" >&2
  exit 1
fi
echo "docsite built in $site/build/html ($(grep -c WARNING "$site/warnings.log" || true) references into Ansible's own documentation left to intersphinx)"
exit "$status"
