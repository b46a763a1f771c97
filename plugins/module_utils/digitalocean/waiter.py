# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Waiting for many droplets at once, with shared paged listings."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.waldur.site_agent.plugins.module_utils.core.shared_wait import SharedWait
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.errors import DigitalOceanError
from ansible_collections.waldur.site_agent.plugins.module_utils.digitalocean.naming import is_resource_tag


def common_tag(entries):
    """A tag every waited droplet carries (not a resource tag, which is one droplet's), or None:
    listing only that tag reads the waited droplets in no more pages than the whole account."""
    shared = None
    for entry in entries:
        tags = set(tag for tag in entry["facts"].get("tags") or [] if not is_resource_tag(tag))
        shared = tags if shared is None else shared & tags
        if not shared:
            return None
    return sorted(shared)[0] if shared else None


class DropletWaiter(SharedWait):
    """Waits for many droplets together, for all threads of one run.

    :meth:`wait` (one droplet, blocking its worker) and :meth:`wait_all` (many, e.g. every
    droplet a pass created) register what they wait for. One waiting thread at a time
    refreshes every registered droplet with the cheapest read: one GET when a single droplet
    is waited for; else one paged listing, of the tag all of them carry when there is one
    (the pass's common tag) or of the account, unless the last such listing took more pages
    than there are droplets (then a GET each). A droplet the listing did not show is not
    read on its own: only after ``CONFIRM_AFTER`` complete listings missed it is it
    confirmed gone with a GET. The next refresh is due ``min_interval`` after the previous
    one while a droplet is unread, else after an interval that doubles (up to
    ``max_interval``) while none finishes, and never sooner than the pacer allows for
    polls spending at most ``poll_share`` of the rate DigitalOcean leaves (``pacing``).
    """

    MIN_INTERVAL = 0.25
    # A booting droplet is read at least every 2.5 s, so it is seen running within 2.5 s of its
    # boot (a 10 s boot was seen at ~16 s with a 10 s cap). One listing per 2.5 s is a tenth of
    # what polls may spend at DigitalOcean's 250 requests a minute; the pacer still stretches it.
    MAX_INTERVAL = 2.5
    CONFIRM_AFTER = 3
    POLL_SHARE = 0.25

    read_error = DigitalOceanError

    def __init__(self, client, min_interval=MIN_INTERVAL, max_interval=MAX_INTERVAL, clock=time.monotonic,
                 poll_share=POLL_SHARE):
        SharedWait.__init__(self, clock)
        self.client = client
        self.poll_share = poll_share
        self.min_interval = min_interval
        self.max_interval = max_interval
        self._last_cost = 0  # requests the last refresh made
        self._interval = min_interval

    def wait(self, facts, statuses, deadline):
        """Block until the droplet of ``facts`` has one of ``statuses`` or is gone, or until
        ``deadline`` (clock time). Returns its latest facts: None when it is gone, the last
        ones seen at the deadline. A failed read raises its DigitalOceanError."""
        [latest] = self.wait_all([(facts, statuses, deadline)])
        if isinstance(latest, DigitalOceanError):
            raise latest
        return latest

    def wait_all(self, requests):
        """``wait`` for many ``(facts, statuses, deadline)`` at once; one outcome each, in order:
        the latest facts, None when gone, or the DigitalOceanError a failed read raised."""
        outcomes = [facts for facts, dummy, dummy in requests]
        entries = [{"index": index, "id": int(facts["id"]), "statuses": tuple(statuses), "facts": facts,
                    "deadline": deadline, "done": False, "seen": False, "missed": 0, "error": None}
                   for index, (facts, statuses, deadline) in enumerate(requests) if facts["status"] not in statuses]
        if not entries:
            return outcomes

        def wake_at(now):
            waiting = [entry for entry in entries
                       if not entry["done"] and entry["error"] is None and now < entry["deadline"]]
            return min(entry["deadline"] for entry in waiting) if waiting else None

        self.wait_for(entries, wake_at)
        for entry in entries:
            outcomes[entry["index"]] = entry["error"] if entry["error"] is not None else entry["facts"]
        return outcomes

    def next_refresh(self):
        if self._last_refresh is None:
            return float("-inf")  # the first refresh is due at once
        unseen = any(not entry["seen"] for entry in self._entries)
        interval = self.min_interval if unseen else self._interval
        paced = self.client.pacer.poll_interval(self._last_cost, self.poll_share) if self._last_cost else 0.0
        return self._last_refresh + max(interval, paced)

    def before_read(self):
        return self.client.stats.thread_calls()  # the reads run in this thread

    def settle(self, batch, found, error, before):
        """What one refresh read: the finished droplets woken, the interval doubled while none is."""
        self._last_cost = self.client.stats.thread_calls() - before
        finished = False
        for entry in batch:
            entry["seen"] = True
            if error is not None:
                entry["error"] = error
            elif entry["id"] in found:
                entry["facts"] = found[entry["id"]]
                if entry["facts"] is None or entry["facts"]["status"] in entry["statuses"]:
                    entry["done"] = finished = True
        self._interval = self.min_interval if finished else min(self.max_interval, self._interval * 2)

    def read(self, batch):
        """``{id: facts or None}`` for the droplets of ``batch`` the read settled (None: gone).
        Counts, per entry, the complete listings that missed its droplet."""
        ids = sorted(set(entry["id"] for entry in batch))
        tag = common_tag(batch)
        pages = self.client.listing_pages(tag)
        if len(ids) == 1 or (pages is not None and pages > len(ids)):
            return dict((droplet_id, self.client.get_droplet(droplet_id) or None) for droplet_id in ids)
        droplets, complete = self.client.poll_droplets(tag_name=tag, max_pages=len(ids))
        wanted = set(ids)
        found = dict((facts["id"], facts) for facts in droplets if facts["id"] in wanted)
        if complete:
            for entry in batch:
                if entry["id"] not in found:
                    entry["missed"] += 1  # the lock is released, but only this refresh writes it
        # a droplet just created may be listed a moment later; one missed again and again is gone
        for droplet_id in sorted(set(entry["id"] for entry in batch
                                     if entry["id"] not in found and entry["missed"] >= self.CONFIRM_AFTER)):
            found[droplet_id] = self.client.get_droplet(droplet_id) or None  # None: proven gone
        return found
