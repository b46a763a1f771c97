"""What do_audit asks of DigitalOcean beyond its listing, for the fake accounts of the unit tests:
a droplet's fresh read as the read layer answers it (``fresh``: proof, ``ProvenAbsence`` for
DigitalOcean's own not-found, ``Unproven`` for a 404 that is not) and the tag writes of
audit_cleanup's mark (``send``)."""

from __future__ import annotations

from ansible_collections.waldur.site_agent.plugins.module_utils.core.evidence import ProvenAbsence, ProvenObject, Unproven

# A 404 whose body is not DigitalOcean's JSON (a proxy's page).
NOT_OURS_404 = "html 404"
MARK = "waldur-orphan-since:"


def fresh(droplet_id, current):
    """What the read layer's ``get_droplet`` answers for ``current`` (a droplet, None or NOT_OURS_404)."""
    call = "GET /v2/droplets/%s" % droplet_id
    if current is None:
        return ProvenAbsence(call)
    if current == NOT_OURS_404:
        raise Unproven("DigitalOcean answered %s with 404 text/html '<html>', not its own not_found" % call, call)
    return ProvenObject(dict(current, tags=list(current["tags"])), call)


class SendsLikeDigitalOcean:
    """``send`` of the client for the tag writes, on the fake's droplets."""

    def droplets_to_tag(self):
        return list(getattr(self, "droplets", None) or getattr(self, "listed", None) or [])

    def send(self, method, url, params=None, retry_writes=False):
        if url == "tags":
            self.calls.append(("create tag", params["name"]))
            return None
        tag = url[len("tags/"):-len("/resources")]
        for resource in params["resources"]:
            self.calls.append(("tag" if method == "POST" else "untag", tag, int(resource["resource_id"])))
            for droplet in self.droplets_to_tag():
                if str(droplet["id"]) == resource["resource_id"]:
                    droplet["tags"] = [t for t in droplet["tags"] if t != tag] + ([tag] if method == "POST" else [])
        return None


def writes(calls):
    """The writes among a fake's calls (tag writes and deletes)."""
    return [call for call in calls if isinstance(call, tuple) and call[0] in ("create tag", "tag", "untag", "destroy")]
