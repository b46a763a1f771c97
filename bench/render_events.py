"""docs/performance.md's event rows: ``results["events_side"]`` of ``bench/events_side.py``,
ours and upstream's ``event_process`` side by side, and issue 26's event targets."""

from __future__ import annotations


def _s(value):
    return "-" if value is None else "%.2f" % value


def _row(run):
    if "error" in run:
        return [run["scenario"], run["agent"], "failed: %s" % run["error"][:120], "", "", "", "", "", ""]
    running = "%d of %d" % (run["done_running"], run["done"]) if run["backend"] == "digitalocean" else "-"
    return [run["scenario"], run["agent"], "%d / %d" % (run["done"], run["orders"]),
            "%s / %s / %s" % (_s(run["median_s"]), _s(run["p95_s"]), _s(run["max_s"])), _s(run["last_done_s"]),
            running, str(run["waldur_calls"]), str(run["cloud_calls"]), run.get("load_before", "?")]


WHERE_THE_TIME_GOES = (
    "Each phase but *other tasks* is one or two module runs, and a module run costs about 0.9 s before its "
    "first call here: a Python process, ansible's `module_utils` compiled again from the AnsiballZ zip on every "
    "run (no bytecode cache), the requests stack and the collection's client. Seven module runs (the offering "
    "check, the backend probe, the order listing, the catalogue check, the claim, the create and the settle) are "
    "most of a run; the API calls themselves take milliseconds against the simulators. Before a run starts, the "
    "message goes from the broker through the source to `ansible-rulebook`, which starts `ansible-runner` and "
    "`ansible-playbook` (about 1.4 s between two runs, *start gap* in the runs' JSON lines). What would remove "
    "it: folding the probe into the catalogue check when there are orders (one module run less), and below that "
    "a resident worker that keeps the Waldur and cloud clients loaded instead of one playbook run per event; "
    "neither the pass lock nor the evidence rules (the catalogue check and Waldur's processing before anything "
    "is built) would change. A burst is one run: the run an order's event starts also takes every other order "
    "of the offering pending when it lists them (`order_process_with_pending`); the event for the rest of the "
    "burst then finds them done.")


def event_side_lines(side: dict | None) -> list[str]:
    """The section's lines; none when the run measured no event scenarios."""
    if not side:
        return []
    lines = [
        "",
        "## The event path, side by side",
        "",
        "Create request sent -> `set_state_done` logged, per order, on one private RabbitMQ (web-STOMP), the",
        "Waldur and DigitalOcean simulators and one site config (`bench/events_side.py`). Ours is",
        "`ansible-rulebook` with the collection's rulebook; upstream is `waldur_site_agent -m event_process`.",
        "*Running at done*: of the orders set done, how many had an `active` droplet at that moment.",
        "Upstream sets `done` right after it has asked DigitalOcean for the droplet (the droplet is",
        "requested, often still `new`); ours sets `done` once the droplet is `active` and its metadata",
        "recorded (the droplet runs). Load average %s at the start, %s at the end (2 CPUs, shared)."
        % (side.get("load_start", "?"), side.get("load_end", "?")),
        "",
        "| scenario | agent | done | median / p95 / max, s | last done, s | running at done | Waldur calls "
        "| cloud calls | load before |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    lines += ["| %s |" % " | ".join(_row(run)) for run in side.get("runs", [])]
    phased = [run for run in side.get("runs", []) if run.get("phases")]
    if phased:
        names = [name for name in phased[0]["phases"] if name not in ("run", "runs")]
        lines += ["", "Where ours spends an order run (median seconds over the runs that created machines, from",
                  "the bench's per-task callback; *outside tasks* is ansible's own time after the callback loaded,",
                  "not counting `ansible-playbook`'s start-up before it, nor the event's way from the broker",
                  "through the source and `ansible-rulebook`):", "",
                  "| scenario | runs | run, s | %s |" % " | ".join(names),
                  "|---|---|---|%s" % ("---|" * len(names))]
        lines += ["| %s | %d | %s | %s |" % (run["scenario"], run["phases"]["runs"], _s(run["phases"]["run"]),
                                             " | ".join(_s(run["phases"].get(name)) for name in names))
                  for run in phased]
        lines += ["", WHERE_THE_TIME_GOES]
    if side.get("targets"):
        lines += ["", "| event target (issue 26) | limit, s | ours, s | upstream, s | met |", "|---|---|---|---|---|"]
        lines += ["| %s | %s | %s | %s | %s |" % (
            row["target"], _s(row["limit_s"]), _s(row["ours_s"]), _s(row["upstream_s"]),
            "yes" if row["met"] else "**no**") for row in side["targets"]]
    return lines
