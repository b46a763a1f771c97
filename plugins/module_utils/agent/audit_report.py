# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""The audit's report: what people read (the table and the Markdown), the report files, and
the part every backend audit module shares (options, parameter checks, ``finish``).
The findings themselves are judged in ``agent/audit.py``, the cleanup and the repair planned in
``audit_cleanup.py`` and ``audit_repair.py``."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import tempfile

from ansible_collections.waldur.site_agent.plugins.module_utils.agent.audit import COUNT_NAMES, public, short_uuid, status
from ansible_collections.waldur.site_agent.plugins.module_utils.agent.audit_cleanup import DEFAULT_CLEANUP_MAX, DELETED, WOULD_DELETE, plan_cleanup, stale_marks
from ansible_collections.waldur.site_agent.plugins.module_utils.agent.audit_marks import (
    DEFAULT_GRACE_HOURS,
    MARK,
    ORPHAN_MARK,
    UNMARK,
    first_sighting_text,
    iso,
    mark_value,
)
from ansible_collections.waldur.site_agent.plugins.module_utils.agent.audit_repair import DEFAULT_REPAIR_MAX, FAILED, REPAIRED, WOULD_REPAIR, plan_repair
from ansible_collections.waldur.site_agent.plugins.module_utils.core.pass_guard import PassEnded
from ansible_collections.waldur.site_agent.plugins.module_utils.core.times import utc_now
from ansible_collections.waldur.site_agent.plugins.module_utils.core.uuids import normalize_uuid


# ---- what people read ---------------------------------------------------------------------

def _resource_text(item):
    if not item["resource_uuid"]:
        return "-"
    name = item["resource_name"] or "?"
    state = " %s" % item["resource_state"] if item["resource_state"] else ""
    return "%s %s%s" % (name, short_uuid(item["resource_uuid"]), state)


def _kind_text(item):
    return "%s (%s)" % (item["kind"], item["check"]) if item["check"] else item["kind"]


def _age_text(item):
    return "-" if item["age_hours"] is None else "%.1f h" % item["age_hours"]


def _what_to_do(item):
    if item["cleanup"] in (DELETED, WOULD_DELETE):
        return "%s by audit_cleanup" % item["cleanup"]
    if item["cleanup"].startswith("failed"):
        return "audit_cleanup %s" % item["cleanup"]
    if item["cleanup"].startswith("kept: ") and ("first seen gone" in item["cleanup"]
                                                 or "could not be proven" in item["cleanup"]):
        return "audit_cleanup %s" % item["cleanup"]
    if item["repair"] and not item["repair"].startswith("audit_repair"):
        return "audit_repair %s; %s" % (item["repair"], item["action"])
    return item["action"]


def _cut(text, width):
    text = str(text)
    return text if len(text) <= width else text[:width - 3] + "..."


def table(findings, title):
    """Plain-text lines: a header, one line per finding and its reason indented under it."""
    lines = [title]
    if not findings:
        return lines + ["nothing found"]
    rows = [(_kind_text(item), _resource_text(item), _cut(item["object"], 60), _age_text(item), _what_to_do(item))
            for item in findings]
    header = ("KIND", "RESOURCE", "CLOUD OBJECT", "AGE", "WHAT TO DO")
    widths = [max(len(row[index]) for row in rows + [header]) for index in range(4)]

    def line(row):
        return "  ".join(cell.ljust(widths[index]) for index, cell in enumerate(row[:4])) + "  " + row[4]

    lines.append(line(header))
    for item, row in zip(findings, rows):
        lines.append(line(row))
        lines.append(" " * (widths[0] + 2) + "why: " + item["detail"])
    return lines


def _md(text):
    return str(text if text not in (None, "") else "-").replace("|", "\\|").replace("\n", " ")


def markdown(report):
    """The report as Markdown, for a ticket."""
    counts_row = report["counts"]
    lines = [
        "# Audit of %s" % report["offering"],
        "",
        "- offering UUID: `%s` (%s)" % (report["offering_uuid"], report["backend"]),
        "- generated: %s" % report["generated_at"],
        "- status: **%s**" % report["status"],
        "- cleanup: %s" % report["cleanup_text"],
        "- repair: %s" % report["repair_text"],
        "",
        "| orphans | vanished | drift | stuck orders | orphans by name (information) | deleted | would delete "
        "| repaired | would repair |",
        "|---|---|---|---|---|---|---|---|---|",
        "| %d | %d | %d | %d | %d | %d | %d | %d | %d |" % (
            counts_row["orphans"], counts_row["vanished"], counts_row["drift"], counts_row["stuck_orders"],
            counts_row["orphans_by_name"], counts_row["deleted"], counts_row["would_delete"], counts_row["repaired"],
            counts_row["would_repair"]),
        "",
    ]
    if report["findings"]:
        lines += ["| kind | resource | resource UUID | state | cloud object | age | why | what to do | cleanup | repair |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for item in report["findings"]:
            lines.append("| %s |" % " | ".join(_md(cell) for cell in (
                _kind_text(item), item["resource_name"], item["resource_uuid"], item["resource_state"],
                item["object"], _age_text(item), item["detail"], item["action"], item["cleanup"], item["repair"])))
    else:
        lines.append("Nothing found: the cloud and Waldur agree.")
    if report.get("notes"):
        lines += ["", "## Notes", ""] + ["- %s" % _md(note) for note in report["notes"]]
    return "\n".join(lines) + "\n"


def _repair_text(repair, repair_refused, check_mode):
    if repair and repair_refused:
        return "REFUSED, nothing resized: %s" % repair_refused
    if repair:
        return ("on: size drift is resized back to the size Waldur's limits map to, when a direct read in Waldur shows "
                "the resource OK with those limits and the resize is safe; never deletes; power is left to "
                "membership_sync%s" % (" (check mode: nothing resized)" if check_mode else ""))
    return "off (set audit_repair: true to resize diverged machines back to what Waldur records)"


def counts(findings):
    """The report's ``counts``: findings by kind, and what the cleanup and the repair did."""
    totals = dict((name, 0) for name in COUNT_NAMES.values())
    for item in findings:
        totals[COUNT_NAMES[item["kind"]]] += 1
    totals["deleted"] = sum(1 for item in findings if item["cleanup"] == DELETED)
    totals["would_delete"] = sum(1 for item in findings if item["cleanup"] == WOULD_DELETE)
    totals["cleanup_failed"] = sum(1 for item in findings if item["cleanup"].startswith("failed"))
    totals["marked"] = sum(1 for item in findings if "(marked %s " % ORPHAN_MARK in item["cleanup"])
    totals["would_mark"] = sum(1 for item in findings if "(would mark %s " % ORPHAN_MARK in item["cleanup"])
    totals["repaired"] = sum(1 for item in findings if item["repair"].startswith(REPAIRED))
    totals["would_repair"] = sum(1 for item in findings if item["repair"].startswith(WOULD_REPAIR))
    totals["repair_failed"] = sum(1 for item in findings if item["repair"].startswith(FAILED))
    return totals


def build_report(offering, offering_uuid, backend, findings, notes, cleanup, min_age_hours, check_mode, api_calls,
                 now=None, refused="", evidence=None, repair=False, repair_refused="", grace_hours=DEFAULT_GRACE_HOURS):
    """The machine-readable report (what the JSON file holds), plus its Markdown and table."""
    shown = public(findings)
    if cleanup and refused:
        cleanup_text = "REFUSED, nothing deleted: %s" % refused
    elif cleanup:
        cleanup_text = ("on: orphans older than %g h whose every object carries this offering's owner mark and whose "
                        "resource a direct read in Waldur answers 404 or Terminated for, on two passes at least %g h "
                        "apart (the first marks it %s)%s" % (
                            min_age_hours, grace_hours, ORPHAN_MARK,
                            " (check mode: nothing deleted or marked)" if check_mode else ""))
    else:
        cleanup_text = "off (set audit_cleanup: true to delete orphans older than %g h)" % min_age_hours
    report = {
        "offering": offering,
        "offering_uuid": offering_uuid,
        "backend": backend,
        "generated_at": iso(now or utc_now()),
        "status": status(findings),
        "counts": counts(findings),
        "cleanup": {"enabled": bool(cleanup), "min_age_hours": min_age_hours, "grace_hours": grace_hours,
                    "check_mode": bool(check_mode), "refused": refused if cleanup else "",
                    "evidence": dict(evidence or {})},
        "cleanup_text": cleanup_text,
        "repair": {"enabled": bool(repair), "check_mode": bool(check_mode), "refused": repair_refused if repair else ""},
        "repair_text": _repair_text(repair, repair_refused, check_mode),
        "findings": shown,
        "notes": list(notes),
        "api_calls": api_calls,
    }
    title = "Audit of %s (%s): %s - %s" % (offering, backend, report["status"], ", ".join(
        "%s=%d" % (key, value) for key, value in report["counts"].items()))
    lines = table(shown, title)
    if cleanup and refused:
        lines.append("audit_cleanup REFUSED, nothing deleted: %s" % refused)
    if repair and repair_refused:
        lines.append("audit_repair REFUSED, nothing resized: %s" % repair_refused)
    return report, markdown(report), lines


# ---- the backend modules' common part -----------------------------------------------------

def audit_argument_spec():
    """Options every audit module takes (doc fragment ``waldur.site_agent.audit``)."""
    return dict(
        offering=dict(type="str", default=""),
        offering_uuid=dict(type="str", required=True),
        resources=dict(type="list", elements="dict", required=True),
        stuck_orders=dict(type="list", elements="dict", default=[]),
        cleanup=dict(type="bool", default=False),
        cleanup_min_age_hours=dict(type="float", default=24.0),
        cleanup_grace_hours=dict(type="float", default=DEFAULT_GRACE_HOURS),
        cleanup_max=dict(type="int", default=DEFAULT_CLEANUP_MAX),
        cleanup_evidence=dict(type="dict"),
        repair=dict(type="bool", default=False),
        repair_max=dict(type="int", default=DEFAULT_REPAIR_MAX),
        repair_evidence=dict(type="dict"),
        report_dir=dict(type="path"),
        report_name=dict(type="str"),
        report_link=dict(type="path"),
    )


def write_report_files(report_dir, name, report, text, link=None):
    """``<report_dir>/<name>.json`` and ``.md``, each replaced whole (a reader never sees half a
    report); returns their paths. ``link``: ``<link>.json`` and ``.md`` then point at them, by
    links relative to their folder, each replaced whole too (an offering's latest report)."""
    if not os.path.isdir(report_dir):
        os.makedirs(report_dir, 0o750)
    paths = []
    for suffix, content in ((".json", json.dumps(report, indent=2, sort_keys=False) + "\n"), (".md", text)):
        path = os.path.join(report_dir, name + suffix)
        handle, temporary = tempfile.mkstemp(prefix="." + name, dir=report_dir)
        try:
            with os.fdopen(handle, "w") as stream:
                stream.write(content)
            os.chmod(temporary, 0o640)
            os.rename(temporary, path)
        finally:
            if os.path.exists(temporary):
                os.unlink(temporary)
        paths.append(path)
    for path in paths if link else ():
        latest = link + os.path.splitext(path)[1]
        folder = os.path.dirname(latest) or "."
        # a fresh name beside it, then one rename: the link is never missing
        temporary = os.path.join(folder, ".%s.%d.link" % (os.path.basename(latest), os.getpid()))
        if os.path.lexists(temporary):
            os.unlink(temporary)
        os.symlink(os.path.relpath(path, folder), temporary)
        try:
            os.rename(temporary, latest)
        finally:
            if os.path.lexists(temporary):
                os.unlink(temporary)
    return paths


def checked_params(module):
    """The offering UUID and the resources with UUIDs normalised; a bad one fails the module naming it."""
    params = module.params
    try:
        offering_uuid = normalize_uuid(params["offering_uuid"])
    except ValueError:
        module.fail_json(msg="offering_uuid: %r is not a UUID (32 hex digits, dashes optional)"
                         % (params["offering_uuid"],))
    if params["cleanup_min_age_hours"] < 0:
        module.fail_json(msg="cleanup_min_age_hours: expected 0 or more hours, got %s"
                         % params["cleanup_min_age_hours"])
    if params["cleanup_grace_hours"] < 0:
        module.fail_json(msg="cleanup_grace_hours: expected 0 or more hours, got %s" % params["cleanup_grace_hours"])
    if params["cleanup_max"] < 0:
        module.fail_json(msg="cleanup_max: expected 0 or more holdings, got %s" % params["cleanup_max"])
    if params["repair_max"] < 0:
        module.fail_json(msg="repair_max: expected 0 or more machines, got %s" % params["repair_max"])
    if params["repair_evidence"] is not None:
        checked = {}
        for key, answer in params["repair_evidence"].items():
            try:
                checked[normalize_uuid(key)] = dict(answer) if isinstance(answer, dict) else str(answer)
            except ValueError:
                module.fail_json(msg="repair_evidence: %r is not a resource UUID (32 hex digits, dashes optional)"
                                 % (key,))
        params["repair_evidence"] = checked
    evidence = params["cleanup_evidence"]
    if evidence is not None:
        checked = {}
        for key, answer in evidence.items():
            try:
                checked[normalize_uuid(key)] = str(answer)
            except ValueError:
                module.fail_json(msg="cleanup_evidence: %r is not a resource UUID (32 hex digits, dashes optional)"
                                 % (key,))
        params["cleanup_evidence"] = checked
    name = params["report_name"]
    if name is not None and (not name.strip() or "/" in name or name.strip(".") == ""):
        module.fail_json(msg="report_name: expected a file name without '/', got %r" % (name,))
    if params["report_link"] and not params["report_dir"]:
        module.fail_json(msg="report_link: points at the report, so report_dir is needed too")
    resources = []
    for index, resource in enumerate(params["resources"]):
        item = dict(resource)
        try:
            item["uuid"] = normalize_uuid(item.get("uuid"))
        except ValueError:
            item["uuid"] = None
        if not item["uuid"]:
            module.fail_json(msg="resources[%d].uuid: expected the resource's UUID, got %r" % (index, resource.get("uuid")))
        if not item.get("state"):
            module.fail_json(msg="resources[%d].state: expected the resource's Waldur state" % index)
        resources.append(item)
    return offering_uuid, resources


def _guarded(write):
    """``write`` returning why it failed when the pass ended meanwhile (nothing more is written)."""
    def guarded(*args):
        if write is None:
            return "this backend keeps no marks"
        try:
            return write(*args)
        except PassEnded as ended:
            return str(ended)
    return guarded


def _marks(module, auditor, holdings, findings, mark, unmark, final):
    """Write (or, in check mode, say) the marks plan_cleanup asked for, and take away the marks whose
    resource Waldur shows alive again; each finding's cleanup and the notes say what was done.
    ``final``: this run is the one that reports (not the first look of a run that is asked again with
    the direct reads' answers, which would take the marks away unreported)."""
    params, check_mode = module.params, module.check_mode
    value = mark_value(auditor.now)
    for item in findings:
        action = item.pop("_mark", None)
        if action == MARK and not check_mode:
            failure = mark(item["_holding"], value)
            item["cleanup"] = ("failed: could not mark it first seen gone (%s %s): %s" % (ORPHAN_MARK, value, failure)
                               if failure else first_sighting_text(auditor.now, params["cleanup_grace_hours"], True))
        elif action == UNMARK:
            failure = None if check_mode else unmark(item["_holding"])
            item["cleanup"] += ("; would remove its %s mark" % ORPHAN_MARK if check_mode else
                                "; could not remove its %s mark: %s" % (ORPHAN_MARK, failure) if failure else
                                "; its %s mark is removed" % ORPHAN_MARK)
    for holding, resource in stale_marks(holdings, auditor.by_uuid) if final else ():
        why = "%s: its %s mark is no evidence, resource %s (%s) is %s in Waldur" % (
            holding["object"], ORPHAN_MARK, resource.get("name") or "?", holding["owner"], resource.get("state"))
        if not params["cleanup"]:
            auditor.notes.append("%s; audit_cleanup removes the mark" % why)
        elif check_mode:
            auditor.notes.append("%s; audit_cleanup would remove the mark" % why)
        else:
            failure = unmark(holding)
            auditor.notes.append("%s; %s" % (why, "could not remove the mark: %s" % failure if failure
                                             else "the mark is removed"))


def finish(module, backend, offering_uuid, auditor, holdings, machines, delete, api_calls, repair=None,
           repair_unsupported="", mark=None, unmark=None):
    """Judge, clean up and repair what was asked for, report; ``delete(holding)`` returns the cleanup
    text (``deleted``, ``would delete`` or why it was kept), ``repair(finding)`` the repair's outcome
    (``repaired ...``, ``would repair ...``, ``refused: why`` or ``failed: why``); neither raises.
    ``mark(holding, value)`` puts ``waldur-orphan-since`` with ``value`` on the holding's marked
    objects and ``unmark(holding)`` takes every such mark away; each returns why it failed, or None.
    ``repair_unsupported`` says why this backend repairs nothing."""
    params = module.params
    auditor.holdings(holdings)
    auditor.machines(machines, holdings)
    auditor.stuck_orders(params["stuck_orders"], holdings, machines)
    findings = auditor.sorted_findings()
    to_delete, candidates, refused = plan_cleanup(
        findings, params["cleanup"], params["cleanup_min_age_hours"], evidence=params["cleanup_evidence"],
        max_deletions=params["cleanup_max"], waldur_lists_nothing=not auditor.resources and bool(holdings),
        grace_hours=params["cleanup_grace_hours"], now=auditor.now, check_mode=module.check_mode)
    final = not params["cleanup"] or params["cleanup_evidence"] is not None or not candidates
    _marks(module, auditor, holdings, findings, _guarded(mark), _guarded(unmark), final)
    for item in to_delete:
        try:
            item["cleanup"] = delete(item["_holding"])
        except PassEnded as ended:  # the pass's controller was killed: nothing more is deleted
            item["cleanup"] = "kept: %s" % ended
    to_repair, repair_candidates, repair_refused = plan_repair(
        findings, params["repair"], evidence=params["repair_evidence"], max_repairs=params["repair_max"],
        unsupported=repair_unsupported)
    for item in to_repair:
        try:
            item["repair"] = repair(item)
        except PassEnded as ended:
            item["repair"] = "%s: %s" % (FAILED, ended)
    report, text, lines = build_report(
        params["offering"] or offering_uuid, offering_uuid, backend, findings, auditor.notes, params["cleanup"],
        params["cleanup_min_age_hours"], module.check_mode, api_calls(), now=auditor.now, refused=refused,
        evidence=params["cleanup_evidence"], repair=params["repair"], repair_refused=repair_refused,
        grace_hours=params["cleanup_grace_hours"])
    files = []
    if params["report_dir"]:
        name = params["report_name"] or params["offering"] or offering_uuid
        report["report_files"] = [os.path.join(params["report_dir"], name + suffix) for suffix in (".json", ".md")]
        try:
            files = write_report_files(params["report_dir"], name, report, text, link=params["report_link"])
        except (IOError, OSError) as error:
            module.fail_json(msg="report_dir: could not write the report to %s: %s" % (params["report_dir"], error),
                             status=report["status"], counts=report["counts"], findings=report["findings"],
                             api_calls=api_calls())
        lines.append("report: %s" % ", ".join(files))
    totals = report["counts"]
    module.exit_json(changed=totals["deleted"] + totals["would_delete"] + totals["repaired"] + totals["would_repair"] > 0,
                     cleanup_candidates=candidates if params["cleanup"] and not refused else [],
                     cleanup_refused=refused,
                     repair_candidates=repair_candidates if params["repair"] and not repair_refused else [],
                     repair_refused=repair_refused,
                     status=report["status"], counts=report["counts"], findings=report["findings"],
                     notes=report["notes"], report=report, markdown=text, table=lines, report_files=files,
                     listed={"holdings": len(holdings), "machines": len(machines)}, api_calls=api_calls())
