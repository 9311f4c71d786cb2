"""``reports``: rate and backlog reports, report runs and charts.

Kept apart from the Pulsar-style groups: the reporting endpoints live under
``/admin/v2/reports`` (rates and backlog per namespace, the run history, on-demand runs,
and charts of a topic's subscription as PNG or HTML).  ``start`` queues a run and prints the
ids of the runs recorded for it (one per job); ``run ID`` shows one of them, and with
``--wait`` both follow their runs to the end: a line on stderr at every change of status, the
final documents on stdout, and the exit status from the result (0 succeeded, 1 failed, 3 still
unfinished when ``--wait-timeout`` ran out).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from sluice.admin_cli.client import AdminError, segment
from sluice.admin_cli.commands.common import add_command, add_group
from sluice.admin_cli.names import namespace_path, topic_parts
from sluice.admin_cli.views import ADVICE, BACKLOG_REPORT, QUEUED_RUNS, RATE_REPORT, RUNS

BASE = "/admin/v2/reports"
JOBS = ("rates", "backlog", "advice")
STATUSES = ("queued", "running", "succeeded", "failed")
FINISHED = ("succeeded", "failed")
POLL_SECONDS = 1.0
EXIT_FAILED, EXIT_UNFINISHED = 1, 3


def _report(kind: str):
    def handler(args, admin):
        params = {
            "since": args.since,
            "window": args.window,
            "topic": args.topic,
            "subscription": args.subscription,
        }
        if kind == "backlog":
            params["top"] = args.top
        return admin.request(
            "GET", f"{BASE}/{kind}/{namespace_path(args.namespace)}", params=params
        )

    return handler


def _advice(args, admin):
    path = f"{BASE}/advice/{namespace_path(args.namespace)}"
    if args.topic:
        tenant, namespace, local = topic_parts(args.topic)
        path = f"{BASE}/advice/{segment(tenant)}/{segment(namespace)}/{segment(local)}"
    return admin.request("GET", path)


def _runs(args, admin):
    params = {"job": args.job, "status": args.status, "taskId": args.task_id, "limit": args.limit}
    return admin.request("GET", f"{BASE}/runs", params=params)


def _progress(run: dict) -> str:
    line = f"run {run['id']} ({run['job']}): {run['status']}, attempt {run['attempt']}"
    if run["status"] == "succeeded":
        line += f", {run['rows']} rows"
        if run.get("dataUntil"):
            line += f", data until {run['dataUntil']}"
    if run.get("error"):
        line += f": {run['error']}"
    return line


def _follow(args, admin, runs: list[dict]) -> list[dict]:
    """Poll ``runs`` until every one has finished or ``--wait-timeout`` runs out; report each
    change of status on stderr and set the exit status from the outcome."""
    deadline = None if args.wait_timeout is None else time.monotonic() + args.wait_timeout
    seen: dict[int, tuple] = {}
    while True:
        for run in runs:
            state = (run["status"], run["attempt"], run.get("error"))
            if seen.get(run["id"]) != state:
                seen[run["id"]] = state
                print(_progress(run), file=sys.stderr, flush=True)
        pending = [run["id"] for run in runs if run["status"] not in FINISHED]
        left = None if deadline is None else deadline - time.monotonic()
        if not pending or (left is not None and left <= 0):
            break
        time.sleep(POLL_SECONDS if left is None else min(POLL_SECONDS, left))
        runs = [admin.request("GET", f"{BASE}/runs/{run['id']}") for run in runs]
    if pending:
        ids = ", ".join(str(i) for i in pending)
        print(f"not finished after {args.wait_timeout:g} s: run {ids}", file=sys.stderr)
        args.result_code = EXIT_UNFINISHED
    elif any(run["status"] == "failed" for run in runs):
        args.result_code = EXIT_FAILED
    return runs


def _run(args, admin):
    run = admin.request("GET", f"{BASE}/runs/{args.id}")
    if not args.wait:
        return run
    [run] = _follow(args, admin, [run])
    return run


def _start(args, admin):
    jobs = [j.strip() for j in args.jobs.split(",") if j.strip()]
    body: dict = {"jobs": jobs}
    if args.lookback_seconds is not None:
        body["lookbackSeconds"] = args.lookback_seconds
    queued = admin.request("POST", f"{BASE}/runs", body=body)
    if args.wait:
        queued["runs"] = _follow(args, admin, queued["runs"])
    return queued


def _wait_flags(parser) -> None:
    parser.add_argument(
        "-w",
        "--wait",
        "--follow",
        action="store_true",
        help="follow to the end: status changes on stderr, exit 0 succeeded, 1 failed, "
        "3 unfinished at --wait-timeout",
    )
    parser.add_argument(
        "--wait-timeout", type=float, metavar="SECONDS", help="with --wait: give up after this"
    )


def _chart(args, admin):
    tenant, namespace, local = topic_parts(args.topic)
    path = f"{BASE}/charts/{segment(tenant)}/{segment(namespace)}/{segment(local)}"
    params = {
        "subscription": args.subscription,
        "window": args.window,
        "since": args.since,
        "format": args.format,
    }
    content = admin.download(path, params=params)
    target = Path(args.output_file or f"{local}-{args.subscription}.{args.format}")
    try:
        target.write_bytes(content)
    except OSError as exc:
        raise AdminError(f"cannot write {target}: {exc.strerror}") from None
    return str(target)


def _window_flags(parser) -> None:
    parser.add_argument("--since", default="1h", help="how far back, e.g. 15m, 1h, 1d (default 1h)")
    parser.add_argument(
        "--window", default="minute", choices=("minute", "hour", "day"), help="default minute"
    )


def register(commands, parents) -> None:
    """Add the ``reports`` group."""
    group = add_group(commands, "reports", "Rate and backlog reports, runs and charts")
    for kind, help_text in (
        ("rates", "Dispatch per subscription per window against the limit in force"),
        ("backlog", "Backlog per subscription per window, its growth and time to drain"),
    ):
        parser = add_command(group, kind, help_text, _report(kind), parents)
        view = RATE_REPORT if kind == "rates" else BACKLOG_REPORT
        parser.set_defaults(table_view=view)
        parser.epilog = (
            f"--output table shows {', '.join(view.columns_help)}; --columns all shows "
            "every column, --columns A,B,... the ones named."
        )
        parser.add_argument("namespace", help="tenant/namespace")
        _window_flags(parser)
        parser.add_argument("--topic", help="only this topic")
        parser.add_argument("-s", "--subscription", help="only this subscription")
        if kind == "backlog":
            parser.add_argument("--top", type=int, help="only the N fastest-growing per window")

    advice = add_command(
        group,
        "advice",
        "Recommended dispatch limits with their arithmetic, and findings (the latest advice run)",
        _advice,
        parents,
    )
    advice.set_defaults(table_view=ADVICE)
    advice.add_argument("namespace", help="tenant/namespace")
    advice.add_argument("--topic", help="only this topic (persistent://tenant/namespace/topic)")

    runs = add_command(group, "runs", "Report runs, newest first", _runs, parents)
    runs.set_defaults(table_view=RUNS)
    runs.add_argument("--job", choices=JOBS)
    runs.add_argument("--status", choices=STATUSES)
    runs.add_argument("--task-id", help="only the runs of this task (as `start` prints it)")
    runs.add_argument("--limit", type=int, default=50)

    run = add_command(group, "run", "One report run: its status, attempts and error", _run, parents)
    run.add_argument("id", type=int, help="the run id (as `start` and `runs` print it)")
    _wait_flags(run)

    start = add_command(
        group, "start", "Queue a report run now; prints the id of each job's run", _start, parents
    )
    start.set_defaults(table_view=QUEUED_RUNS)
    start.add_argument("--jobs", default=",".join(JOBS), help="comma-separated (default all)")
    start.add_argument(
        "--lookback-seconds", type=float, help="recompute this far back (default: the schedule's)"
    )
    _wait_flags(start)

    chart = add_command(
        group, "chart", "Chart rate vs limit and backlog to a file", _chart, parents
    )
    chart.add_argument("topic", help="persistent://tenant/namespace/topic")
    chart.add_argument("-s", "--subscription", required=True)
    _window_flags(chart)
    chart.add_argument("--format", default="png", choices=("png", "html"))
    chart.add_argument("-f", "--output-file", help="default <topic>-<subscription>.<format>")
