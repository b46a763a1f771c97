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
    if side.get("targets"):
        lines += ["", "| event target (issue 26) | limit, s | ours, s | upstream, s | met |", "|---|---|---|---|---|"]
        lines += ["| %s | %s | %s | %s | %s |" % (
            row["target"], _s(row["limit_s"]), _s(row["ours_s"]), _s(row["upstream_s"]),
            "yes" if row["met"] else "**no**") for row in side["targets"]]
    return lines
