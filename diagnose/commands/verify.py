"""``diagnose verify DUMP``: run the likely hypotheses' read-only checks on this host, now."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from diagnose.commands.options import Subcommands, add_debug, root_cause
from diagnose.errors import ExitCode, InputError


def add_parser(commands: Subcommands) -> None:
    command = commands.add_parser(
        "verify",
        help="run the hypotheses' read-only checks on this host and say what each found",
        description=(
            "Diagnose DUMP (a recording of this host: the flight recorder's, or diagnose record's), then, "
            "for its likely hypotheses and the runner-up (or those --cause names), run the read-only "
            "checks their rules list on this host now: the host's schedules (crontabs, systemd timers) "
            "against a co-located job's period and command, NVML's clock event reasons for throttling, "
            "the engine's /metrics for KV-cache pressure, stalls and a growing queue, and /proc for the "
            "server's threads, page faults and start, the run queue, swap and the contending job. Each "
            "check says whether it confirms or refutes the hypothesis, with the weight by which that moves "
            "its score. Nothing is changed, no process is paused, every command has a timeout "
            "(docs/verify.md)."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=(
            "examples:\n"
            "  diagnose verify /var/lib/diagnose/flight/incident-0042/\n"
            "  diagnose verify recording/ --cause co-located-contention\n"
            "  diagnose verify recording/ --metrics-url http://127.0.0.1:8000/metrics --format json"
        ),
    )
    command.add_argument("dump", help="a dump recorded on this host")
    command.add_argument(
        "--cause",
        action="append",
        type=root_cause,
        metavar="ID",
        help="verify this hypothesis (repeatable; default: the likely ones and the runner-up)",
    )
    command.add_argument(
        "--metrics-url", metavar="URL", help="the engine's /metrics (default: the dump's metrics source)"
    )
    command.add_argument(
        "--metrics-map",
        metavar="METRIC=COL,...",
        help="read a service's own metrics as server columns, as record does (default: the map the dump "
        "was recorded with)",
    )
    command.add_argument(
        "--here-anyway",
        action="store_true",
        help="run the checks though the dump was recorded on another host (they read this one)",
    )
    command.add_argument("--format", choices=("text", "json"), default="text", help="default: text")
    command.add_argument(
        "--quiet", action="store_true", help="no status line while the checks run (none off a terminal)"
    )
    command.add_argument("--timeout", type=float, default=5.0, metavar="S", help="per command (default 5)")
    command.add_argument("--rules", type=Path, metavar="DIR", help="use the rules in DIR")
    add_debug(command)
    command.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if not Path(args.dump).exists():
        raise InputError(f"{args.dump}: no such file or folder")
    if args.rules is not None and not args.rules.is_dir():
        raise InputError(f"{args.rules}: not a folder of rule files")
    if not args.timeout > 0:
        raise InputError(f"--timeout {args.timeout:g}: expected a positive number of seconds")
    from diagnose.commands.options import metrics_map
    from diagnose.commands.output import report_width
    from diagnose.commands.status_line import StatusLine, Ticker
    from diagnose.verify import Host, verify
    from diagnose.verify.render import render

    mapping = metrics_map(args.metrics_map) or None
    with Ticker(StatusLine.for_terminal(args.quiet), "diagnose verify") as ticker:
        found = verify(
            args.dump,
            args.rules,
            args.cause,
            Host(timeout_s=args.timeout),
            args.metrics_url,
            mapping,
            args.here_anyway,
            progress=ticker.step,
        )
    sys.stdout.write(render(found, args.format, report_width(None, to_file=False)))
    return ExitCode.OK
