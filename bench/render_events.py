"""docs/performance.md's event rows: ``results["events_side"]`` of ``bench/events_side.py``,
ours and upstream's ``event_process`` side by side, and issue 26's event targets."""

from __future__ import annotations


def stolen_text(share, long=False) -> str:
    """``", 42% stolen"`` (or, ``long``, the whole phrase) for a run's steal; empty where unmeasured."""
    if share is None:
        return ""
    return ", %.0f%% of the CPU time stolen by the host" % share if long else ", %.0f%% stolen" % share


def _s(value):
    return "-" if value is None else "%.2f" % value


def _row(run):
    if "error" in run:
        return [run["scenario"], run["agent"], "failed: %s" % run["error"][:120], "", "", "", "", "", ""]
    running = "%d of %d" % (run["done_running"], run["done"]) if run["backend"] == "digitalocean" else "-"
    return [run["scenario"], run["agent"], "%d / %d" % (run["done"], run["orders"]),
            "%s / %s / %s" % (_s(run["median_s"]), _s(run["p95_s"]), _s(run["max_s"])), _s(run["last_done_s"]),
            running, str(run["waldur_calls"]), str(run["cloud_calls"]),
            "%s%s" % (run.get("load_before", "?"), stolen_text(run.get("steal_pct")))]


def where_the_time_goes(start_gap_s=None) -> str:
    """What the phase table means, with the start gap the 50-order event bench measured, when it ran."""
    gap = (" (%s s from one run's end to the next one's start, median of the 50-order event bench)" % _s(start_gap_s)
           if start_gap_s is not None else "")
    return (
        "Each phase but *other tasks* is one or two module tasks. The collection's modules run inside the task's "
        "worker (`plugins/plugin_utils/controller_module.py`), so a module task costs about a tenth of a second here: the "
        "worker's fork and the task's templating; requests, the SDKs and the collection's client were imported by "
        "the controller once, before it forked the worker. "
        "Run the usual way (`waldur_site_agent_in_process: false`), each module task is a Python of its own "
        "(AnsiballZ's zip built, unpacked and compiled again every run). The API calls take milliseconds against the "
        "simulators. What is left is ansible's own cost per task: the twenty-odd tasks of configuration, lock, "
        "accounting and summary (*other tasks*), each a fork and a template, and ansible-playbook's start (*outside "
        "tasks*). Before a run starts, the message goes from the broker through the source to `ansible-rulebook`, "
        "which starts `ansible-runner` and `ansible-playbook`%s. "
        "Below that floor only a resident worker would go, keeping the pass loaded between events instead of one "
        "playbook run per event; neither the pass lock nor the evidence rules (the catalogue check and Waldur's "
        "processing before anything is built) would change. A burst is one run: the run an order's event starts "
        "also takes every other order of the offering pending when it lists them (`order_process_with_pending`); "
        "the event for the rest of the burst then finds them done." % gap)


def event_side_lines(side: dict | None, start_gap_s=None) -> list[str]:
    """The section's lines; none when the run measured no event scenarios. ``start_gap_s``: the
    event bench's median gap between runs (``results["events"]["passes"]``), when it ran."""
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
        "recorded (the droplet runs). Load average %s at the start, %s at the end (2 CPUs, shared)%s."
        % (side.get("load_start", "?"), side.get("load_end", "?"),
           stolen_text(side.get("steal_pct"), long=True)),
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
        lines += ["", where_the_time_goes(start_gap_s)]
    if side.get("targets"):
        lines += ["", "| event target (issue 26) | limit, s | ours, s | upstream, s | met |", "|---|---|---|---|---|"]
        lines += ["| %s | %s | %s | %s | %s |" % (
            row["target"], _s(row["limit_s"]), _s(row["ours_s"]), _s(row["upstream_s"]),
            "yes" if row["met"] else "**no**") for row in side["targets"]]
    return lines
