# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Run one worker per item on a bounded thread pool with an overall deadline.

Batch modules (``do_droplet``, ``azure_vm_chain``, ``waldur_orders`` ...) take a
list and act on every item concurrently: one item failing never stops the
others, and results come back in the order of the input.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import threading
import traceback

from ansible_collections.waldur.site_agent.plugins.module_utils.core import pass_guard
from ansible_collections.waldur.site_agent.plugins.module_utils.core.packed import pack
from ansible_collections.waldur.site_agent.plugins.module_utils.core.progress import current, module_progress


class ItemError(Exception):
    """A failure of one item whose message is meant for the operator (and Waldur)."""


def _default_error(item, exc):
    message = str(exc) if isinstance(exc, ItemError) else "%s: %s" % (type(exc).__name__, exc)
    return {"failed": True, "changed": False, "msg": message,
            "exception": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))}


def run_batch(items, worker, max_workers=8, deadline_seconds=None, on_error=None, progress=None):
    """Call ``worker(item)`` for every item; return a list of results in input order.

    A worker returns a dict. If it raises, the item's result is
    ``on_error(item, exc)`` (default: ``{"failed": True, "msg": str(exc)}``).
    Items not finished by the deadline get ``{"failed": True, "retry": True, "msg": "... deadline ..."}``
    (``retry``: settle leaves the order for the next pass instead of erring it).
    Workers are daemon threads, so the module can exit at the deadline without
    waiting for calls still in flight; the pass is idempotent, so the next run
    completes what a timed-out item started.

    Once the pass that started this run has ended (``core/pass_guard.py``: its controller was
    killed), no further item is started, and every item not finished well by then ends
    ``{"failed": True, "retry": True, "msg": "the pass that started this run ... has ended ..."}``.

    ``progress``: a ``Progress`` told of every item started and finished (and of what it waits
    for, through ``note``).
    """
    items = list(items)
    results = [None] * len(items)
    if not items:
        return results
    on_error = on_error or _default_error
    lock = threading.Lock()
    all_done = threading.Event()
    state = {"next": 0, "finished": 0, "closed": False}

    def work():
        while True:
            with lock:
                if state["closed"] or state["next"] >= len(items):
                    return
                index = state["next"]
                state["next"] += 1
            result, ended = None, pass_guard.ended()
            if progress is not None:
                progress.start(index)
                current.progress, current.index = progress, index
            if ended is None:
                try:
                    result = worker(items[index])
                except pass_guard.PassEnded as exc:
                    ended = str(exc)
                except Exception as exc:  # one item's failure is that item's result
                    result = on_error(items[index], exc)
                if isinstance(result, dict) and result.get("failed"):
                    ended = pass_guard.ended()  # failed for a write refused? then it is a retry
            if ended is not None:  # not started, or stopped short: the next pass finishes it
                result = dict(result or {}, failed=True, changed=bool((result or {}).get("changed")),
                              retry=True, msg=ended)
                result.pop("exception", None)
            with lock:
                if state["closed"]:  # the deadline passed; this result arrives too late
                    return
                results[index] = result
                if progress is not None:
                    progress.finish(index, result)
                state["finished"] += 1
                if state["finished"] == len(items):
                    all_done.set()

    for number in range(max(1, min(max_workers, len(items)))):
        threading.Thread(target=work, name="batch-worker-%d" % number, daemon=True).start()
    all_done.wait(timeout=deadline_seconds or None)
    with lock:
        state["closed"] = True
        for index, result in enumerate(results):
            if result is None:
                results[index] = {
                    "failed": True, "changed": False, "retry": True,
                    "msg": "not finished within the deadline of %s seconds; "
                           "the next run will pick it up" % deadline_seconds}
    return results


# ------------------------------------------------------------------ the batch module engine

def batch_argument_spec(deadline=900.0):
    """The options of every batch module (documented by the ``waldur.site_agent.batch`` fragment)."""
    return dict(
        max_workers=dict(type="int", default=8),
        deadline=dict(type="float", default=float(deadline)),
        fail_on_item_error=dict(type="bool", default=False),
    )


def batch_option_problem(params, positive=("max_workers", "deadline")):
    """Why the batch options cannot be used (a message naming the option), or None."""
    for option in positive:
        value = params.get(option)
        if value is not None and value <= 0:
            return "%s must be a positive number, got %s" % (option, value)
    return None


def api_call_counts(reads=0, writes=0, retries=0):
    """The one ``api_calls`` shape every batch module returns."""
    return {"reads": int(reads), "writes": int(writes), "retries": int(retries)}


def count_results(results, **predicates):
    """``{name: how many results predicate(result) holds for}``."""
    return dict((name, sum(1 for result in results if predicate(result))) for name, predicate in predicates.items())


def item_name(result):
    """How a diff header names an item: ``vm-1 (resource <uuid>)``, else what is known of it."""
    name = result.get("resource_name") or result.get("name")
    uuid = result.get("resource_uuid") or result.get("order_uuid")
    if name and uuid:
        return "%s (resource %s)" % (name, uuid)
    return str(name or ("resource %s" % uuid if uuid else "item"))


def machine_diff(result, powers, size=None):
    """The ``diff`` of a machine's result, from its ``action``: power ``powers`` = (on, off) words
    (``("active", "off")`` for a droplet); created/deleted as absent and present; a resize as the
    size it got. None when the action changed nothing a person would diff."""
    on, off = powers
    machine = {"backend_id": result.get("backend_id")}
    action = result.get("action")
    if action == "powered_off":
        return {"before": dict(machine, power=on), "after": dict(machine, power=off)}
    if action == "powered_on":
        return {"before": dict(machine, power=off), "after": dict(machine, power=on)}
    if action == "created":
        return {"before": {}, "after": dict(machine, power=on)}
    if action == "deleted":
        return {"before": machine, "after": {}}
    if action == "resized" and size:
        return {"before": machine, "after": dict(machine, size=size)}
    return None


def headed_diffs(results):
    """The items' diffs as one list for Ansible's ``--diff`` output (the default callback prints a
    task's top-level ``diff``, a dict or a list of them): each changed result's ``diff`` with
    ``before_header``/``after_header`` naming the item."""
    diffs = []
    for result in results:
        diff = result.get("diff") if isinstance(result, dict) and result.get("changed") else None
        if isinstance(diff, dict) and "before" in diff and "after" in diff:
            name = item_name(result)
            diffs.append(dict(diff, before_header=diff.get("before_header") or name,
                              after_header=diff.get("after_header") or name))
    return diffs


class BatchRunner:
    """Runs a batch module: checks the batch options, works on the items concurrently, shapes
    every result the same way and exits (``fail_on_item_error`` applied, ``api_calls`` one shape).

    ``echo``: the item keys copied into its result (the input's key: ``resource_uuid``,
    ``order_uuid`` ...), so an item cut off by the deadline still says which it was.
    ``api_calls``: a callable giving ``api_call_counts(...)``; None when the module adds them
    itself (``WaldurModule`` does).
    """

    def __init__(self, module, worker, echo=("resource_uuid",), on_error=None, api_calls=None):
        self.module = module
        self.worker = worker
        self.echo = tuple(echo)
        self.on_error = on_error
        self.api_calls = api_calls
        self.progress = None
        problem = batch_option_problem(module.params)
        if problem:
            self.fail(problem)
        # The module's progress file from its first runner on, not from its first batch: the reads
        # before a batch (prefetch listings, a claim's listings) take minutes at scale too.
        # ``WaldurModule`` counts its calls itself.
        self.progress = module_progress(api_calls or getattr(module, "api_calls", None))

    @property
    def max_workers(self):
        return self.module.params["max_workers"]

    def shape(self, item, result):
        """``result`` with the item's echoed keys and ``changed``/``failed``/``retry``/``msg`` always set."""
        shaped = dict((key, item.get(key)) for key in self.echo if isinstance(item, dict))
        shaped.update(changed=False, failed=False, retry=False, msg="")
        shaped.update(result or {})
        return shaped

    def run(self, items, worker=None):
        """One shaped result per item, in input order."""
        items = list(items)
        if self.progress is not None and items:
            # kept until the next batch or the module's finish: it may still wait for the cloud after the batch
            self.progress.begin(items, self.module.params["deadline"])
        raw = run_batch(items, worker or self.worker, max_workers=self.max_workers,
                        deadline_seconds=self.module.params["deadline"], on_error=self.on_error,
                        progress=self.progress)
        return [self.shape(item, result) for item, result in zip(items, raw)]

    def failure_summary(self, failures, results):
        key = self.echo[0] if self.echo else None
        return "%d of %d item(s) failed: %s" % (len(failures), len(results), "; ".join(
            "%s: %s" % (failure.get(key), failure.get("msg")) for failure in failures))

    def _calls(self, result):
        if self.api_calls is not None:
            result["api_calls"] = self.api_calls()
        return result

    def _stop_progress(self):
        if self.progress is not None:
            self.progress.end()  # the file itself stops when the module ends

    def fail(self, msg, **result):
        self._stop_progress()
        self.module.fail_json(msg=msg, **self._calls(result))

    def finish(self, results, failed=None, fail_msg=None, packed=False, **extra):
        """Exit: ``changed`` when any result changed; fail with ``fail_msg(failures, results)``
        when ``fail_on_item_error`` and any result is failed (``failed(result)`` decides). With
        ``packed``, the results go back as one JSON text, ``results_packed`` (``core/packed``), and
        the failed ones as ``failures`` too, so that they can be named without unpacking."""
        self._stop_progress()
        failed = failed or (lambda result: result.get("failed"))
        summary = dict(extra)
        summary.setdefault("changed", any(result.get("changed") for result in results))
        failures = [result for result in results if failed(result)]
        if getattr(self.module, "_diff", False) and "diff" not in summary:
            diffs = headed_diffs(results)
            if diffs:
                summary["diff"] = diffs
        if packed:
            summary.update(results_packed=pack(results), failures=failures)
        else:
            summary["results"] = results
        if failures and self.module.params.get("fail_on_item_error"):
            summary.pop("msg", None)  # the failure's msg replaces the summary's
            self.fail((fail_msg or self.failure_summary)(failures, results), **summary)
        self.module.exit_json(**self._calls(summary))
