"""``diagnose record``: this host into a dump, or a flight recorder's ring."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from diagnose.commands.options import Subcommands, add_collection_args, add_debug, record_options
from diagnose.commands.status_line import StatusLine
from diagnose.errors import DiagnoseError, DiskFull, ExitCode, InputError
from diagnose.units import counted, human_bytes

if TYPE_CHECKING:
    from diagnose.collectors.recorder import Progress


def add_parser(commands: Subcommands) -> None:
    command = commands.add_parser(
        "record",
        help="record this host (and a service's requests and metrics) into a dump",
        description=(
            "Sample the host (CPU, memory, busiest processes and threads), the GPUs through NVML and, "
            "if given, a service's request log and /metrics endpoint, every interval, into a dump "
            "folder that `diagnose file` reads. Stop with Ctrl-C or --duration; a recording cut short "
            "is still a valid dump."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=_RECORD_EPILOG.format(signals=_signal_lines()),
    )
    command.add_argument(
        "-o",
        "--output",
        type=Path,
        required=True,
        help="the dump folder to create (with --ring: the folder for the ring and the incident dumps)",
    )
    command.add_argument(
        "--duration", metavar="TIME", help="stop after TIME (90s, 15m, 1h); default: until Ctrl-C"
    )
    add_collection_args(command)
    _add_flight_args(command)
    command.add_argument("--force", action="store_true", help="write into an existing, non-empty folder")
    command.add_argument(
        "--quiet", action="store_true", help="no status line while recording (none is drawn off a terminal)"
    )
    add_debug(command)
    command.set_defaults(handler=run)


_RECORD_EPILOG = """\
examples:
  diagnose record -o incident-0412/ --duration 15m \\
      --requests-log /var/log/infer/requests.jsonl --metrics-url http://127.0.0.1:8000/metrics
  diagnose record -o incidents/ --ring 30m --trigger 'p99_ms > 500 for 10s' --trigger 'event oom' \\
      --requests-log /var/log/infer/requests.jsonl      flight recorder: dumps when a trigger fires
  diagnose record -o incidents/ --dump-now            ask the running flight recorder to dump now

trigger signals (the rules' expression language; 'for SPAN': held on every tick for SPAN):
{signals}
  event KIND         an event of that kind was recorded: oom, xid, restart, process_exit, ...
"""


def _signal_lines() -> str:
    from diagnose.collectors.triggers import SIGNALS

    return "\n".join(f"  {name:<18} {meaning}" for name, meaning in SIGNALS.items())


def _add_flight_args(command: argparse.ArgumentParser) -> None:
    """The flight recorder's options (docs/flight-recorder.md)."""
    command.add_argument(
        "--ring",
        metavar="SPAN",
        help="flight recorder: keep only the last SPAN (e.g. 30m) in OUTPUT/.ring and write a dump into "
        "OUTPUT/ when a --trigger fires or on SIGUSR1",
    )
    command.add_argument(
        "--ring-max-size",
        metavar="SIZE",
        help="--ring: the most disk the ring may use (default 1G); the oldest minutes go first",
    )
    command.add_argument(
        "--trigger",
        action="append",
        default=[],
        metavar="COND",
        help="--ring: dump when COND holds, e.g. 'p99_ms > 500 for 10s' or 'event oom' (repeatable)",
    )
    command.add_argument(
        "--after",
        metavar="SPAN",
        help="--ring: how long to keep recording after a trigger before the dump is written (default 1m)",
    )
    command.add_argument(
        "--cooldown",
        metavar="SPAN",
        help="--ring: no second dump within SPAN of a trigger (default 10m; SIGUSR1 is always honoured)",
    )
    command.add_argument(
        "--trigger-window",
        metavar="SPAN",
        help="--ring: the request signals (p99_ms, rps, ...) are over the requests of the last SPAN "
        "(default 10s)",
    )
    command.add_argument(
        "--dump-now",
        action="store_true",
        help="ask the flight recorder running with the same -o to dump now (sends it SIGUSR1), then exit",
    )


def run(args: argparse.Namespace) -> int:
    import signal
    import threading

    from diagnose.collectors.recorder import record
    from diagnose.collectors.writer import check_folder
    from diagnose.units import parse_duration

    if args.dump_now:
        from diagnose.collectors.flight import ask_running_recorder

        pid = ask_running_recorder(args.output)
        print(
            f"diagnose: asked the flight recorder (pid {pid}) to dump; it writes into {args.output}/ "
            "after its --after span",
            file=sys.stderr,
        )
        return ExitCode.OK
    status = StatusLine.for_terminal(args.quiet)
    flight = _flight_recorder(args, status.say)
    if flight is None:
        check_folder(args.output, args.force)  # before "recording to" is said, not after
    options = record_options(args, None if flight else args.output)
    options.duration_s = parse_duration(args.duration) if args.duration else None
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    if flight is not None:
        signal.signal(signal.SIGUSR1, lambda *_: flight.request_dump("SIGUSR1"))
        flight.announce()  # only now: --dump-now's SIGUSR1 would end a recorder without its handler
        print(flight.describe(), file=sys.stderr)
    until = f"for {args.duration}" if args.duration else "until Ctrl-C"

    def started() -> None:  # once the sources are checked: --strict refuses before anything is said
        print(f"diagnose: recording to {args.output} every {args.interval:g} s {until}", file=sys.stderr)

    try:
        shown = (lambda progress: status.show(_status(progress))) if status.enabled else None
        summary = record(options, stop, say=status.say, sink=flight, progress=shown, started=started)
    except DiskFull as error:
        raise DiagnoseError(
            f"{args.output}: the disk is full ({error}); recording stopped, "
            "the dump holds what was written before"
        ) from None
    finally:
        status.clear()
        if flight is not None:
            flight.close()  # a no-op when record() closed it; releases the ring when it failed to start
    if flight is not None:
        dumps = ", ".join(map(str, flight.written)) or "none"
        print(
            f"diagnose: recorded {counted(summary.samples, 'sample')} into the ring; incident dumps: {dumps}",
            file=sys.stderr,
        )
    else:
        print(
            f"diagnose: recorded {counted(summary.samples, 'sample')} to {args.output}"
            + (f" ({summary.skipped_ticks} late ticks skipped)" if summary.skipped_ticks else "")
            + f"; analyse it with: diagnose file {args.output}",
            file=sys.stderr,
        )
    for line in summary.dead_sources:
        print(f"diagnose: warning: recorded without {line}", file=sys.stderr)
    return ExitCode.OK


def _flight_recorder(args: argparse.Namespace, say: Callable[[str], None]):
    """The sink of ``record --ring``, or None; the flight recorder's options without --ring are refused."""
    from diagnose.units import parse_duration, parse_size

    flight_only = {
        "--trigger": args.trigger,
        "--after": args.after,
        "--cooldown": args.cooldown,
        "--trigger-window": args.trigger_window,
        "--ring-max-size": args.ring_max_size,
    }
    if args.ring is None:
        given = [option for option, value in flight_only.items() if value]
        if given:
            they = "they set" if len(given) > 1 else "it sets"
            need = "need" if len(given) > 1 else "needs"
            raise InputError(f"{', '.join(given)} {need} --ring SPAN: {they} up the flight recorder")
        return None
    from diagnose.collectors.flight import FlightOptions, FlightRecorder
    from diagnose.collectors.triggers import parse_trigger

    options = FlightOptions(
        folder=args.output,
        keep_s=parse_duration(args.ring),
        max_bytes=parse_size(args.ring_max_size or "1G"),
        triggers=tuple(parse_trigger(text) for text in args.trigger),
        after_s=parse_duration(args.after or "1m"),
        cooldown_s=parse_duration(args.cooldown or "10m"),
        window_s=parse_duration(args.trigger_window or "10s"),
    )
    if args.output.exists() and not args.output.is_dir():
        raise InputError(f"{args.output}: exists and is not a folder; --ring -o needs a folder")
    return FlightRecorder(options, args.interval, say=say)


def _status(progress: Progress) -> str:
    """recording 1:23, 166 samples, rows: 166 system, 2,045 requests; 1.2 MiB; request log ok"""
    minutes, seconds = divmod(int(progress.elapsed_s), 60)
    rows = ", ".join(f"{count:,} {table}" for table, count in progress.rows.items() if count) or "none"
    parts = [f"recording {minutes}:{seconds:02d}, {counted(progress.samples, 'sample')}, rows: {rows}"]
    if progress.bytes_written is not None:
        parts.append(human_bytes(progress.bytes_written))
    parts += [f"{what} {state}" for what, state in progress.sources]
    return "; ".join(parts)
