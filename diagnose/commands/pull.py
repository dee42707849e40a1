"""``diagnose pull``: a host's window (or a fleet's) from Prometheus into dumps."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from diagnose.commands.options import (
    Subcommands,
    add_debug,
    add_prometheus_auth,
    count,
    positive,
    prometheus_auth,
)
from diagnose.errors import ExitCode, InputError


def add_parser(commands: Subcommands) -> None:
    command = commands.add_parser(
        "pull",
        help="read a host's window from Prometheus (or Thanos, Mimir, VictoriaMetrics) into a dump",
        description=(
            "Read node_exporter, dcgm-exporter and the serving engine's metrics for one host (or every "
            "host, --all-instances) between --from and --to through the Prometheus HTTP API, and write "
            "a dump that diagnose file reads. The manifest says which query gave which column, at "
            "what step. docs/pull.md has the mapping."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=(
            "examples:\n"
            "  diagnose pull --prometheus http://prometheus:9090 --instance gpu-node-7 \\\n"
            "      --from 2026-12-02T02:50:00Z --to 2026-12-02T03:20:00Z -o incident-0412/\n"
            "  diagnose pull --prometheus https://thanos.internal --bearer-token-file ~/.thanos-token \\\n"
            "      --all-instances --job 'gpu-.*' --from now-12h --to now -o sweep/   # + sweep/fleet.md\n"
            "  diagnose pull ... --all-instances --shard $JOB_COMPLETION_INDEX/8 -o /shared/sweep/\n"
            "      # one pod of 8 in a Kubernetes Indexed Job; then: diagnose fleet merge /shared/sweep/"
        ),
    )
    command.add_argument("--prometheus", required=True, metavar="URL", help="the server's base URL")
    which = command.add_mutually_exclusive_group(required=True)
    which.add_argument("--instance", metavar="HOST", help="the host (its instance label, any port)")
    which.add_argument(
        "--all-instances",
        action="store_true",
        help="every host with an up series: one dump each in -o, and fleet.md/fleet.json",
    )
    command.add_argument("--job", metavar="REGEX", help="--all-instances: only the hosts of these jobs")
    command.add_argument(
        "--from", dest="start", required=True, metavar="TIME", help="ISO-8601 with zone, epoch, now-1h"
    )
    command.add_argument("--to", dest="end", default="now", metavar="TIME", help="as --from (default now)")
    command.add_argument(
        "--step", metavar="SPAN", help="resolution (default: the scrape interval, read from the data)"
    )
    command.add_argument("-o", "--output", type=Path, required=True, help="the dump folder to create")
    add_prometheus_auth(command)
    command.add_argument(
        "--timeout", type=positive, default=30.0, metavar="S", help="seconds per request (default 30)"
    )
    command.add_argument("--rules", type=Path, metavar="DIR", help="--all-instances: diagnose with DIR")
    command.add_argument(
        "--max-concurrency",
        type=count,
        default=4,
        metavar="N",
        help="--all-instances: hosts pulled and analysed at once, each in a process of its own (default 4, "
        "which a small Prometheus survives; a busy server's 429 and 503 are retried after a pause)",
    )
    command.add_argument(
        "--shard",
        type=_shard,
        metavar="K/N",
        help="--all-instances: only shard K (0 to N-1) of N, by a stable hash of the host's name "
        "(a Kubernetes Indexed Job's $JOB_COMPLETION_INDEX); writes fleet-shard-K-of-N.json",
    )
    command.add_argument(
        "--resume",
        action="store_true",
        help="--all-instances: keep the hosts an earlier sweep of the same window into -o finished",
    )
    add_debug(command)
    command.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from diagnose.pull import PrometheusClient, pull, sweep
    from diagnose.pull.pull import parse_time
    from diagnose.units import counted, parse_duration

    if not args.all_instances:
        for given, option in ((args.job, "--job"), (args.shard, "--shard"), (args.resume, "--resume")):
            if given:
                raise InputError(f"{option} is for --all-instances; with --instance it does not apply")
    auth = prometheus_auth(args)
    client = PrometheusClient(args.prometheus, auth, args.ca_file, args.timeout)
    start, end = parse_time(args.start), parse_time(args.end)
    step = parse_duration(args.step) if args.step else None
    say = lambda line: print(line, file=sys.stderr)  # noqa: E731
    if args.all_instances:
        results = sweep(
            client,
            start,
            end,
            args.output,
            args.job,
            step,
            args.rules,
            say=say,
            shard=args.shard,
            concurrency=args.max_concurrency,
            resume=args.resume,
        )
        failed = [r for r in results if r.problem]
        name = "fleet" if args.shard is None else f"fleet-shard-{args.shard[0]}-of-{args.shard[1]}"
        print(
            f"diagnose: {len(results) - len(failed)} of {counted(len(results), 'host')} pulled and analysed "
            "into "
            f"{args.output}/; the summary: {args.output / (name + '.md')}",
            file=sys.stderr,
        )
        return ExitCode.OK
    summary = pull(client, args.instance, start, end, args.output, step, say=say)
    tables = ", ".join(f"{table} {rows}" for table, rows in summary.rows.items()) or "no rows"
    print(
        f"diagnose: pulled {summary.instance} at {summary.step_s:g} s into {args.output} ({tables})"
        + (f"; not found: {', '.join(summary.missing)}" if summary.missing else "")
        + f"; analyse it with: diagnose file {args.output}",
        file=sys.stderr,
    )
    return ExitCode.OK


def _shard(text: str) -> tuple[int, int]:
    """``K/N``: shard K (0 to N-1) of N."""
    index, _, total = text.partition("/")
    try:
        shard = int(index), int(total)
    except ValueError:
        shard = (-1, 0)
    if shard[1] < 1 or not 0 <= shard[0] < shard[1]:
        raise argparse.ArgumentTypeError(f"expected K/N with 0 <= K < N (a shard of N), got {text!r}")
    return shard
