"""Generate the variables section of every role's README.md from its meta/argument_specs.yml.

    .venv/bin/python scripts/gen_role_readmes.py           # rewrite the sections in place
    .venv/bin/python scripts/gen_role_readmes.py --check   # exit 1 when one is out of date

Each ``roles/<role>/README.md`` is written by hand (what the role does, an example) except
the part between the markers below, which is the role's summary, description and a table of
its variables (type, default, required, description), taken from the entry point ``main`` of
``meta/argument_specs.yml``. A README without the markers, or a role without a README, is an
error; ``tests/unit/test_role_readmes.py`` runs the check, so the tables cannot drift from the
argument specs that ansible-core validates.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
ROLES = REPO / "roles"
BEGIN = "<!-- BEGIN generated from meta/argument_specs.yml by scripts/gen_role_readmes.py -->"
END = "<!-- END generated -->"

_MARKUP = re.compile(r"\b([OCVEIM])\(([^()]*(?:\([^()]*\)[^()]*)*)\)")


def roles() -> list[Path]:
    return sorted(path.parent.parent for path in ROLES.glob("*/meta/argument_specs.yml"))


def spec(role: Path) -> dict:
    return yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]


def markup(text: str) -> str:
    """Ansible's documentation markup (O(), C(), V(), E(), I(), M()) as Markdown."""
    def one(match):
        kind, value = match.groups()
        plugin, sep, option = value.partition("#")
        if sep:  # O(waldur.site_agent.waldur_orders#module:x): the option of another plugin
            value = "%s %s" % (plugin.rsplit(".", 1)[-1], option.split(":", 1)[-1])
        return "*%s*" % value if kind == "I" else "`%s`" % value
    return _MARKUP.sub(one, " ".join(str(text).split()))


def _lines(value) -> list[str]:
    if value is None:
        return []
    return [markup(item) for item in (value if isinstance(value, list) else [value])]


def _default(option: dict) -> str:
    if "default" not in option:
        return ""
    value = option["default"]
    if value == "":
        return '`""`'
    if isinstance(value, (dict, list)):
        return "`%s`" % yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
    if isinstance(value, bool):
        return "`%s`" % str(value).lower()
    return "`%s`" % value


def _type(option: dict) -> str:
    kind = option.get("type", "str")
    if kind == "list" and option.get("elements"):
        kind = "list of %s" % option["elements"]
    if option.get("choices"):
        kind += "; one of %s" % ", ".join("`%s`" % choice for choice in option["choices"])
    return kind


def section(role: Path) -> str:
    main = spec(role)
    out = [BEGIN, "", "**%s**" % markup(main["short_description"]), ""]
    for paragraph in _lines(main.get("description")):
        out += [paragraph, ""]
    out += ["### Variables", "",
            "| variable | type | default | required | description |",
            "|---|---|---|---|---|"]
    for name, option in main.get("options", {}).items():
        description = " ".join(_lines(option.get("description"))).replace("|", "\\|")
        out.append("| `%s` | %s | %s | %s | %s |" % (name, _type(option).replace("|", "\\|"), _default(option),
                                                     "yes" if option.get("required") else "no", description))
    out += ["", END]
    return "\n".join(out)


def render(role: Path, current: str) -> str:
    if current.count(BEGIN) != 1 or current.count(END) != 1:
        raise ValueError("%s: README.md needs the markers %r and %r once each" % (role.name, BEGIN, END))
    before, rest = current.split(BEGIN)
    dummy, after = rest.split(END)
    return before + section(role) + after


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a README is out of date")
    args = parser.parse_args(argv)
    status = 0
    for role in roles():
        readme = role / "README.md"
        if not readme.is_file():
            print("roles/%s/README.md is missing" % role.name, file=sys.stderr)
            status = 2
            continue
        current = readme.read_text()
        try:
            wanted = render(role, current)
        except ValueError as error:
            print(error, file=sys.stderr)
            status = 2
            continue
        if wanted != current:
            if args.check:
                print("roles/%s/README.md is out of date: run .venv/bin/python scripts/gen_role_readmes.py"
                      % role.name, file=sys.stderr)
                status = max(status, 1)
            else:
                readme.write_text(wanted)
    return status


if __name__ == "__main__":
    sys.exit(main())
