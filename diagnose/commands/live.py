"""``diagnose live``: the full-screen view of this host, or of a dump replayed."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from diagnose.commands.options import (
    Subcommands,
    add_collection_args,
    add_debug,
    add_view_args,
    positive,
    record_options,
    window_seconds,
)
from diagnose.errors import DiagnoseError, ExitCode, InputError


def add_parser(commands: Subcommands) -> None:
    command = commands.add_parser(
        "live",
        help="watch this host (or replay a dump) in a full-screen view as the hypotheses form",
        description=(
            "A terminal view that samples this host every interval, re-analyses the last WINDOW every "
            "few seconds and shows the charts, the stage breakdown, the top processes and the ranked "
            "hypotheses. With --replay it plays a recorded dump instead: no GPU needed. Press ? inside "
            "for the keys."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=(
            "examples:\n"
            "  diagnose live --requests-log /var/log/infer/requests.jsonl\n"
            "  diagnose live --record incident-0412/          also write the dump while watching\n"
            "  diagnose live --replay fixtures/dumps/co-located-contention --speed 20"
        ),
    )
    command.add_argument(
        "--replay", metavar="DUMP", help="play this dump folder instead of sampling the host"
    )
    command.add_argument(
        "--speed", type=positive, default=1.0, metavar="X", help="replay speed, x real time (default 1)"
    )
    command.add_argument("--record", type=Path, metavar="DIR", help="also write what is sampled as a dump")
    command.add_argument("--force", action="store_true", help="let --record write into a non-empty folder")
    command.add_argument(
        "--rules", type=Path, metavar="DIR", help="use the rules in DIR instead of the built-in ones"
    )
    command.add_argument("--slo-p99-ms", type=positive, metavar="MS", help="the P99 latency target")
    add_view_args(command, default_window="15m")
    add_collection_args(command)
    add_debug(command)
    command.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.replay and args.record:
        raise DiagnoseError("--replay plays a dump that is already recorded; --record does not apply to it")
    return run_view(args, replay=args.replay, speed=args.speed)


def run_view(args: argparse.Namespace, replay: str | None, speed: float) -> int:
    """The full-screen view. Textual is imported only here, so reports and recording never load it."""
    from diagnose.judge import default_rules_dir, load_rules

    window_s = window_seconds(args.window)
    export_dir = _export_dir(args.export_dir)
    rules = load_rules(args.rules or default_rules_dir())
    feed = _replay_feed(args, replay, speed) if replay else _live_feed(args, window_s)
    from diagnose.live.app import LiveApp, LiveSettings

    settings = LiveSettings(rules, window_s, args.refresh or 5.0, args.slo_p99_ms, export_dir)
    app = LiveApp(feed, settings)
    try:
        app.run()
    finally:
        feed.close()
    if app.exported is not None:
        print(f"diagnose: last Markdown report: {app.exported}", file=sys.stderr)
    return ExitCode.OK


def _export_dir(given: Path | None) -> Path:
    """The folder ``m`` writes to: the one given, checked now rather than at the first export, or the
    user's state folder (made when first written)."""
    if given is None:
        from diagnose.live.export import default_export_dir

        return default_export_dir()
    folder = given.resolve()
    if not folder.is_dir():
        raise InputError(f"{folder}: not a folder; --export-dir needs an existing folder")
    if not os.access(folder, os.W_OK):
        raise InputError(f"{folder}: permission denied; m could not write its report there")
    return folder


def _replay_feed(args: argparse.Namespace, path: str, speed: float):
    from diagnose.dump import load_dump
    from diagnose.live.feed import ReplayFeed

    dump = load_dump(path, tz=getattr(args, "tz", None))
    for warning in dump.warnings:
        print(f"diagnose: warning: {warning}", file=sys.stderr)
    return ReplayFeed(dump, speed=speed, from_start=speed > 0)


def _live_feed(args: argparse.Namespace, window_s: float | None):
    from diagnose.live.feed import LiveFeed

    feed = LiveFeed(record_options(args, args.record), keep_s=max(window_s or 3600.0, 3600.0))
    feed.start()
    return feed
