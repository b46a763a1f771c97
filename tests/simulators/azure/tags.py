"""ARM's Tags API at a scope (a mixin of AzureSimulator): ``PATCH {scope}/providers/
Microsoft.Resources/tags/default``, which the SDK calls ``tags.begin_update_at_scope``.

``operation`` ``Merge`` adds tags and sets the values of tags it names (names compare
case-insensitively, as ARM's do; the stored name keeps its first spelling), ``Replace`` sets the
whole set, ``Delete`` removes the tags it names whose value matches (or any value, when the value is
empty). The answer is the ``TagsResource`` (200), at once: ARM carries tag changes out synchronously.
A scope that does not exist is 404 ``ResourceGroupNotFound`` or ``ResourceNotFound``; a subnet or a
rule cannot carry tags (400 ``InvalidRequestContent``), as in ARM."""

from __future__ import annotations

from werkzeug.wrappers import Request, Response

from tests.simulators.azure.arm import ArmError
from tests.simulators.common import json_response

S = "/subscriptions/<sub>"
RG = S + "/resourceGroups/<rg>"
TAGS = "/providers/Microsoft.Resources/tags/default"
OPERATIONS = ("Merge", "Replace", "Delete")
# Parts of their parents: ARM keeps no tags on them.
UNTAGGED_KINDS = ("subnet", "security_rule")


class TagsProvider:
    """The Tags API routes (operation ``tags.update_at_scope``)."""

    def tags_routes(self):
        return [
            ("PATCH", RG + TAGS, "tags.update_at_scope", self._patch_group_tags),
            ("PATCH", RG + "/providers/<provider>/<path:rest>" + TAGS, "tags.update_at_scope",
             self._patch_resource_tags),
        ]

    def _patch_group_tags(self, request: Request, sub: str, rg: str) -> Response:
        return self._patch_tags(request, self._require_group(rg))

    def _patch_resource_tags(self, request: Request, sub: str, rg: str, provider: str, rest: str) -> Response:
        group = self._require_group(rg)
        record = self._lookup(f"{group['id']}/providers/{provider}/{rest}")
        if record is None:
            raise ArmError(404, "ResourceNotFound",
                           f"The Resource '{provider}/{rest}' under resource group '{group['name']}' was not "
                           "found. For more details please go to https://aka.ms/ARMResourceNotFoundFix")
        return self._patch_tags(request, record)

    def _patch_tags(self, request: Request, record: dict) -> Response:
        if record["kind"] in UNTAGGED_KINDS:
            raise ArmError(400, "InvalidRequestContent", "The resource type does not support tags.")
        body = self._json(request)
        operation = body.get("operation")
        tags = (body.get("properties") or {}).get("tags")
        if operation not in OPERATIONS:
            raise ArmError(400, "InvalidRequestContent",
                           f"The operation '{operation}' is not one of {', '.join(OPERATIONS)}.")
        if not isinstance(tags, dict):
            raise ArmError(400, "InvalidRequestContent", "The 'properties.tags' property must be an object.")
        current = dict(record.get("tags") or {})
        if operation == "Replace":
            current = dict(tags)
        for name, value in tags.items() if operation != "Replace" else ():
            stored = next((key for key in current if key.lower() == str(name).lower()), None)
            if operation == "Merge":
                current[stored or name] = value
            elif stored is not None and value in ("", None, current[stored]):
                del current[stored]
        record["tags"] = current
        scope = self._public_id(record)
        return json_response({"id": scope + TAGS, "name": "default", "type": "Microsoft.Resources/tags",
                              "properties": {"tags": dict(current)}})
