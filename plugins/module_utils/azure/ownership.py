# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Owner tags on the ARM objects of a Waldur machine, and what they allow.

Every object the agent makes (resource group, virtual network, public IP
address, network security group, network interface, virtual machine, and the
OS disk once the machine exists) carries two tags:

``waldur-resource-uuid``
    the Waldur resource the object belongs to (32 lower-case hex digits);
``waldur-offering-uuid``
    the offering whose agent made it.

A subnet cannot carry tags in ARM: it belongs to its virtual network. The
resource tag is the owner mark: an object is adopted (or deleted) only when
it carries this resource's mark; an object at a wanted name with another mark,
or none, is never adopted, changed or deleted. The offering tag is for the
operator (cost reports, audits) and is not part of the decision: a resource
UUID belongs to one offering.

Only objects made before the tags existed (by Waldur Mastermind or an earlier
version of the agent) are reached without the mark, and only through the
backend id Waldur holds for them: never by a name the agent derives.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.waldur.site_agent.plugins.module_utils.core.uuids import is_uuid, normalize_uuid

RESOURCE_TAG = "waldur-resource-uuid"
OFFERING_TAG = "waldur-offering-uuid"

ADOPT = "adopt"
RETRY = "retry"
FAILED = "failed"
FOREIGN = "foreign"

_SUCCEEDED = "succeeded"
_FAILED_STATES = ("failed", "canceled")


def owner_tags(resource_uuid, offering_uuid=None):
    """The tags that mark an object as this resource's (the offering's when known)."""
    tags = {RESOURCE_TAG: normalize_uuid(resource_uuid)}
    if offering_uuid:
        tags[OFFERING_TAG] = normalize_uuid(offering_uuid)
    return tags


def with_owner_tags(tags, resource_uuid, offering_uuid=None):
    """``tags`` (an object's current tags) with the owner tags set, other tags kept."""
    merged = dict((key, value) for key, value in (tags or {}).items()
                  if key.lower() not in (RESOURCE_TAG, OFFERING_TAG))
    merged.update(owner_tags(resource_uuid, offering_uuid))
    return merged


def tag_value(tags, key):
    """The value of tag ``key`` (tag names are case-insensitive in ARM), or None."""
    for name, value in (tags or {}).items():
        if str(name).lower() == key:
            return value
    return None


def owner_of(obj):
    """The Waldur resource an SDK object (or a ``{"tags": ...}`` dict) belongs to, or None.

    A tag value that is not a UUID counts as a foreign owner: it is returned as it is,
    so the message can show it, and it never equals a normalised resource UUID.
    """
    tags = obj.get("tags") if isinstance(obj, dict) else getattr(obj, "tags", None)
    value = tag_value(tags, RESOURCE_TAG)
    if value in (None, ""):
        return None
    return normalize_uuid(value) if is_uuid(value) else str(value)


def has_owner_tags(obj, resource_uuid, offering_uuid=None):
    """Whether ``obj`` already carries exactly the owner tags it should."""
    tags = getattr(obj, "tags", None) or {}
    wanted = owner_tags(resource_uuid, offering_uuid)
    return all(tag_value(tags, key) == value for key, value in wanted.items())


def tag_filter(uuid, tag=RESOURCE_TAG):
    """ARM's ``$filter`` for the objects of one resource (resource groups and resource lists), or
    with ``tag=OFFERING_TAG`` of one offering."""
    return "tagName eq '%s' and tagValue eq '%s'" % (tag, normalize_uuid(uuid))


def describe_owner(owner):
    """How a message names an object's owner."""
    return "no owner tag" if owner is None else "owner tag %s=%s" % (RESOURCE_TAG, owner)


def provisioning_state(obj):
    """The object's ``provisioningState`` in lower case (``succeeded``, ``creating``, ...); None if absent."""
    state = getattr(obj, "provisioning_state", None)
    if state is None:
        properties = getattr(obj, "properties", None)
        state = getattr(properties, "provisioning_state", None)
    state = getattr(state, "value", state)
    return str(state).lower() if state else None


def failure_reason(obj):
    """The cloud's reason a VM's provisioning failed, from its instance view (None when not told)."""
    view = getattr(obj, "instance_view", None)
    for status in getattr(view, "statuses", None) or []:
        code = str(getattr(status, "code", None) or "")
        if code.lower().startswith("provisioningstate/failed"):
            detail = code.split("/", 2)[2] if code.count("/") >= 2 else ""
            message = getattr(status, "message", None) or getattr(status, "display_status", None) or ""
            return ": ".join(part for part in (detail, message) if part) or None
    return None


def judge(label, obj, resource_uuid, owned_by_parent=False):
    """What the agent may do with ``obj``, found at a name it wants: ``(verdict, reason)``.

    ``label`` names the object in messages (``virtual network netweb``). Verdicts:

    * ``adopt``: it carries this resource's owner tag (or belongs to an object that
      does, ``owned_by_parent``: a subnet) and its provisioning succeeded;
    * ``retry``: it is ours and still being provisioned (or deleted): the next pass looks again;
    * ``failed``: it is ours and its provisioning failed: the reason is the cloud's;
    * ``foreign``: it carries another owner's tag or none: never adopted, changed or deleted.
    """
    if not owned_by_parent:
        owner = owner_of(obj)
        if owner != normalize_uuid(resource_uuid):
            return FOREIGN, ("%s exists with %s, not this resource's (%s=%s); it is not adopted, changed or "
                             "deleted" % (label, describe_owner(owner), RESOURCE_TAG, normalize_uuid(resource_uuid)))
    state = provisioning_state(obj)
    if state in (None, _SUCCEEDED):
        return ADOPT, None
    if state in _FAILED_STATES:
        reason = failure_reason(obj)
        return FAILED, "%s exists but its provisioning %s%s" % (
            label, "failed" if state == "failed" else "was canceled", ": %s" % reason if reason else "")
    return RETRY, "%s is still %s; the next pass looks at it again" % (label, state)
