# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""DigitalOcean's read layer: droplets, the account and images, each answer checked before it is decided on."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from urllib.parse import quote

from ansible_collections.waldur.site_agent.plugins.module_utils.core.evidence import (
    INTEGER,
    LIST,
    NULL,
    OBJECT,
    STRING,
    ProvenAbsence,
    ProvenList,
    ProvenObject,
    Shape,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.binding import BoundListing
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.errors import DigitalOceanNotFound, DigitalOceanUnproven
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.facts import droplet_facts

PER_PAGE = 200
# What the agent reads of a droplet, and the JSON types the API documents (DigitalOcean's OpenAPI):
# a droplet of another shape in an answer is not proof.
DROPLET_SHAPE = Shape("droplet", required={
    "id": INTEGER, "name": STRING, "status": STRING, "tags": LIST, "region": OBJECT, "size_slug": STRING,
}, optional={
    "image": (OBJECT, NULL), "created_at": (STRING, NULL), "networks": (OBJECT, NULL), "size": (OBJECT, NULL),
})
ACCOUNT_SHAPE = Shape("account", required={"uuid": STRING, "status": STRING},
                      optional={"droplet_limit": INTEGER, "email": STRING})
# The account as the quota check reads it: the limit must be there to approve anything on it.
ACCOUNT_LIMITS_SHAPE = Shape("account", required={"uuid": STRING, "status": STRING, "droplet_limit": INTEGER})
# A listing's ``meta`` (every paged listing of DigitalOcean carries its total).
LISTING_META_SHAPE = Shape("listing meta", required={"total": INTEGER})


class DropletReads:
    """The reads of ``DigitalOceanClient``, over its ``transport.Transport``: every answer is a
    ``ProvenObject``, ``ProvenList`` or ``ProvenAbsence``, or raises ``DigitalOceanUnproven``."""

    def __init__(self, *args, **kwargs):
        super(DropletReads, self).__init__(*args, **kwargs)
        # droplets in the account at the last listing (None until one): whether paging pays
        self.droplet_total = None
        # the same per tag listed, for choosing the cheapest read
        self.droplet_totals = {}

    # ---- account ------------------------------------------------------------------
    def account(self):
        """The account the token belongs to (``GET /v2/account``): the cheapest read that proves
        the token and the API."""
        return self._object(self.build(BoundListing).get_data("account/"), "account", "GET /v2/account",
                            ACCOUNT_SHAPE)

    def account_limits(self):
        """The account with its ``droplet_limit`` (``GET /v2/account``), for the quota check before
        approval: an answer without the limit proves nothing to approve on."""
        return self._object(self.build(BoundListing).get_data("account/"), "account", "GET /v2/account",
                            ACCOUNT_LIMITS_SHAPE)

    def droplet_count(self):
        """How many droplets the account has (``GET /v2/droplets?page=1&per_page=1``: the listing's
        ``meta.total``), as a ``ProvenObject`` ``{"total": n}``. A first page that holds no droplet
        while the total says there are some (or more than the one asked for) is not trusted."""
        call = "GET /v2/droplets/?per_page=1"
        data = self.build(BoundListing).get_data("droplets/", params={"page": 1, "per_page": 1})
        items, total = self._page(data, "droplets", call, DROPLET_SHAPE)
        if total < 0 or len(items) != min(total, 1):
            raise self._unproven(call, "a page of %d droplet(s) but a total of %d" % (len(items), total))
        return ProvenObject({"total": total}, call)

    # ---- catalogue ----------------------------------------------------------------
    def image(self, image):
        """The image ``image`` names (``GET /v2/images/{id or slug}``: public images by slug or id,
        the account's snapshots and custom images by id), or ``ProvenAbsence`` when DigitalOcean
        answers its own not_found."""
        path = "images/%s" % quote(str(image).strip(), safe="")
        try:
            data = self.build(BoundListing).get_data(path)
        except DigitalOceanNotFound:
            return ProvenAbsence("GET /v2/" + path)
        return self._object(data, "image", "GET /v2/" + path)

    # ---- the read layer: answers checked before anything is decided on them -----------
    @staticmethod
    def _unproven(call, problem):
        method, _space, path = call.partition(" ")
        return DigitalOceanUnproven("DigitalOcean %s answered %s; it is not trusted" % (call, problem),
                                    method=method, path=path)

    def _object(self, data, key, call, shape=None):
        """The object under ``key`` of an answer (``{"droplet": {...}}``), checked against ``shape``."""
        found = (data or {}).get(key) if isinstance(data, dict) else None
        if not isinstance(found, dict):
            raise self._unproven(call, "without the object %r" % key)
        problem = shape.problem(found) if shape is not None else None
        if problem:
            raise self._unproven(call, "JSON of another shape (%s)" % problem)
        return ProvenObject(found, call)

    def _page(self, data, key, call, shape=None):
        """``(items, total)`` of one page (or of the pages the library joined): the list under
        ``key``, every item an object of ``shape``, and the listing's ``meta.total``."""
        items = data.get(key) if isinstance(data, dict) else None
        if not isinstance(items, list):
            raise self._unproven(call, "without the list %r" % key)
        meta = data.get("meta")
        problem = LISTING_META_SHAPE.problem(meta) if isinstance(meta, dict) else "no meta.total (a listing's count)"
        if problem is None:
            problem = shape.first_problem(items) if shape is not None else None
            if problem is None and not all(isinstance(item, dict) for item in items):
                problem = "items that are not objects"
        if problem:
            raise self._unproven(call, "JSON of another shape (%s)" % problem)
        return items, meta["total"]

    # ---- droplets -----------------------------------------------------------------
    def listing(self, path, key, params=None, shape=None):
        """All objects under ``key`` of a paged listing (the library follows ``links.pages.next``), as a
        ``ProvenList``: every item of ``shape`` and as many as the listing's ``meta.total``."""
        call = "GET /v2/" + path
        data = self.build(BoundListing).get_data(path, params=dict(params or {}, per_page=PER_PAGE))
        items, total = self._page(data, key, call, shape)
        if total != len(items):
            # the library joined every page: fewer (or more) items than the total means a page was lost
            raise self._unproven(call, "pages holding %d item(s) but a total of %d" % (len(items), total))
        return ProvenList(items, call)

    def list_droplets(self, tag_name=None):
        """Facts of every droplet (with ``tag_name``: carrying that tag), as a ``ProvenList``."""
        params = {"tag_name": tag_name} if tag_name else {}
        listed = self.listing("droplets/", "droplets", params, shape=DROPLET_SHAPE)
        if tag_name:
            self.droplet_totals[tag_name] = len(listed)
        return ProvenList([droplet_facts(item) for item in listed], "%s?tag_name=%s" % (listed.source, tag_name)
                          if tag_name else listed.source)

    def droplets_carrying(self, tag_name):
        """The droplets carrying ``tag_name``, for a decision taken on their absence (creating a droplet,
        erring an order): a listing that shows none is read once more, and the two must agree, so one
        answer that lost its items (an empty page of a cache or a proxy, consistent in itself) never
        makes a second machine or errs an order whose machine runs."""
        listed = self.list_droplets(tag_name=tag_name)
        if listed:
            return listed
        again = self.list_droplets(tag_name=tag_name)
        if again:
            raise DigitalOceanUnproven(
                "two listings of the droplets carrying tag %s disagree (none, then %s); nothing is decided on them"
                % (tag_name, ", ".join(str(droplet["id"]) for droplet in again)), method="GET", path="/v2/droplets")
        return again

    def get_droplet(self, droplet_id):
        """Facts of one droplet (``ProvenObject``), or ``ProvenAbsence`` when DigitalOcean answers its own
        not_found; any other answer raises ``DigitalOceanUnproven``."""
        call = "GET /v2/droplets/%s" % droplet_id
        try:
            data = self.build(BoundListing).get_data("droplets/%s" % droplet_id)
        except DigitalOceanNotFound:
            return ProvenAbsence(call)
        return ProvenObject(droplet_facts(self._object(data, "droplet", call, DROPLET_SHAPE)), call)

    def find_droplets(self, droplet_ids):
        """``{id: facts or ProvenAbsence}`` for many ids, from the paged listing rather than one GET
        each; ids the listing did not show are confirmed with a GET (a droplet created
        while paging can shift the pages), and a short list of ids against a huge
        account stops paging and GETs them instead."""
        wanted = set(int(i) for i in droplet_ids)
        found = {}
        page = 1
        listing = self.build(BoundListing)
        while wanted - set(found):
            data = listing.get_data("droplets/", params={"page": page, "per_page": PER_PAGE})
            items, total = self._page(data, "droplets", "GET /v2/droplets/", DROPLET_SHAPE)
            for item in items:
                if item["id"] in wanted:
                    found[item["id"]] = ProvenObject(droplet_facts(item), "GET /v2/droplets/")
            self.droplet_total = total
            has_next = bool(((data.get("links") or {}).get("pages") or {}).get("next"))
            if not has_next:
                break
            pages_left = -(-total // PER_PAGE) - page
            if pages_left > len(wanted - set(found)):
                break
            page += 1
        for droplet_id in sorted(wanted - set(found)):
            found[droplet_id] = self.get_droplet(droplet_id)
        return found

    def scan_droplets(self, max_pages):
        """Facts of every droplet of the account from one paged listing (a ``ProvenList``), or None when
        that would take more than ``max_pages`` requests or the account changed while paging (a
        droplet deleted meanwhile shifts the later pages, so one could be missed)."""
        listing = self.build(BoundListing)
        seen = {}
        totals = set()
        page = 1
        while True:
            data = listing.get_data("droplets/", params={"page": page, "per_page": PER_PAGE})
            items, total = self._page(data, "droplets", "GET /v2/droplets/", DROPLET_SHAPE)
            self.droplet_total = total
            if -(-total // PER_PAGE) > max_pages:
                return None
            totals.add(total)
            for item in items:
                seen[item["id"]] = droplet_facts(item)
            if not ((data.get("links") or {}).get("pages") or {}).get("next"):
                break
            page += 1
        if len(totals) != 1 or len(seen) != totals.pop():
            return None
        return ProvenList(seen.values(), "GET /v2/droplets/")

    def listing_pages(self, tag_name=None):
        """Pages the last listing of the droplets (carrying ``tag_name``) took, or None before one."""
        total = self.droplet_total if tag_name is None else self.droplet_totals.get(tag_name)
        return None if total is None else max(1, -(-total // PER_PAGE))

    def poll_droplets(self, tag_name=None, max_pages=None):
        """``(facts, complete)``: the droplets (carrying ``tag_name``) of one paged listing, for
        waiting on their status. It stops after the first page when the listing would take more
        than ``max_pages``. ``complete`` says whether a droplet the listing did not show is
        absent: every page was read and the total did not change while paging (a droplet
        created or deleted meanwhile shifts the later pages). What was seen is true either way."""
        params = {"tag_name": tag_name} if tag_name else {}
        listing = self.build(BoundListing)
        seen = {}
        totals = set()
        page = 1
        while True:
            data = listing.get_data("droplets/", params=dict(params, page=page, per_page=PER_PAGE))
            items, total = self._page(data, "droplets", "GET /v2/droplets/", DROPLET_SHAPE)
            for item in items:
                seen[item["id"]] = droplet_facts(item)
            totals.add(total)
            if tag_name is None:
                self.droplet_total = total
            else:
                self.droplet_totals[tag_name] = total
            if not ((data.get("links") or {}).get("pages") or {}).get("next"):
                complete = True
                break
            if max_pages is not None and -(-total // PER_PAGE) > max_pages:
                complete = False
                break
            page += 1
        complete = complete and len(totals) == 1 and len(seen) == next(iter(totals))
        return list(seen.values()), complete
