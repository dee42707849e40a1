"""``diagnose archive``: keep recordings' figures, what changed and what it gained."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from diagnose.commands.options import Subcommands, add_debug, root_cause, zone
from diagnose.commands.output import ready_to_write
from diagnose.errors import ExitCode, InputError


def add_parser(commands: Subcommands) -> None:
    command = commands.add_parser(
        "archive",
        help="the performance archive: keep recordings' figures, what changed and what it gained",
        description=(
            "An SQLite file of measured recordings (their figures with intervals, environment and "
            "diagnosis; not the raw tables) and of the comparisons between them. Default file: "
            "$DIAGNOSE_ARCHIVE, else $XDG_DATA_HOME/diagnose/archive.sqlite, else "
            "~/.local/share/diagnose/archive.sqlite."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=(
            "examples:\n"
            "  diagnose archive add baseline/ --label v1.3\n"
            "  diagnose archive add candidate/ --label v1.4-int8 --change 'INT8 weights' --expect 'p99 -30%' "
            "--baseline 1\n"
            "  diagnose archive add warmed/ --change 'warm-up before traffic' "
            "--expects cold-start-contamination --baseline 1\n"
            "  diagnose archive list\n"
            "  diagnose archive show 2\n"
            "  diagnose archive trend --metric p99\n"
            "  diagnose compare --baseline 1 tonight/"
        ),
    )
    command.add_argument("action", choices=("add", "list", "show", "trend"))
    command.add_argument("target", nargs="?", help="the dump (add) or the recording's id (show)")
    command.add_argument("--archive", type=Path, metavar="FILE", help="the archive file")
    command.add_argument("--label", help="add: a name for the recording, e.g. v1.4-int8")
    command.add_argument("--change", help="add: what was changed, e.g. 'INT8 weights'")
    command.add_argument("--expect", help="add: the gain expected, e.g. 'p99 -30%%'")
    command.add_argument(
        "--expects",
        type=root_cause,
        metavar="ID",
        help="add, with --baseline: the hypothesis of the baseline's diagnosis the change was to fix; the "
        "gain its diagnosis expected is kept beside what the change delivered",
    )
    command.add_argument("--note", help="add: anything else: side effects, who, why")
    command.add_argument(
        "--baseline", type=int, metavar="ID", help="add: also compare with recording #ID and keep the result"
    )
    command.add_argument("--metric", default="p99", help="trend: the figure to follow (default p99)")
    command.add_argument(
        "--chart", type=Path, metavar="FILE.png", help="trend: also draw the figure across the recordings"
    )
    command.add_argument("--rules", type=Path, metavar="DIR", help="add: diagnose with the rules in DIR")
    command.add_argument("--tz", type=zone, metavar="ZONE", help="add: zone of foreign files' naive times")
    add_debug(command)
    command.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from diagnose.archive import Archive, default_path
    from diagnose.archive.views import entries_table, entry_text, trend_table

    path = args.archive or default_path()
    if args.action == "add":
        if args.target is None or not Path(args.target).exists():
            raise InputError(
                f"archive add needs a dump: {args.target or 'none given'}: no such file or folder"
            )
        if args.expects is not None and args.baseline is None:
            raise InputError(
                "archive add --expects needs --baseline ID: the recording whose diagnosis expected the gain"
            )
        return _archive_add(args, path)
    with Archive(path, create=False) as archive:
        if args.action == "list":
            sys.stdout.write(entries_table(archive.entries()))
        elif args.action == "show":
            if args.target is None or not args.target.isdigit():
                raise InputError("archive show needs a recording's id, e.g. diagnose archive show 3")
            entry = archive.entry(int(args.target))
            sys.stdout.write(entry_text(entry, archive.comparisons(entry.id)))
        else:
            entries = archive.entries()
            sys.stdout.write(trend_table(entries, args.metric))
            if args.chart is not None:
                ready_to_write(args.chart)
                from diagnose.pictures.trend import draw_trend, trend_data

                data = trend_data(entries, args.metric)
                if data is not None:
                    from diagnose.pictures import style

                    style.save(draw_trend(data), args.chart)
                    print(f"diagnose: trend chart written to {args.chart.resolve()}", file=sys.stderr)
    return ExitCode.OK


def _archive_add(args: argparse.Namespace, path: Path) -> int:
    from diagnose.archive import Archive
    from diagnose.compare import compare_evidence, measure_path
    from diagnose.compare.verdict import decisive_figures

    with Archive(path) as archive:
        baseline = archive.evidence(args.baseline) if args.baseline is not None else None
        if baseline is not None and args.expects is not None:
            from diagnose.compare.delivery import expected_gain_of

            expected_gain_of(baseline, args.expects)  # an error before any work, if nothing to check
        evidence, requests = measure_path(args.target, args.rules, args.tz)
        already = archive.holding(evidence)
        entry = archive.add(evidence, args.label, args.change, args.expect, args.note)
        print(f"diagnose: archived {args.target} as #{entry} in {path}", file=sys.stderr)
        if already:
            kept = ", ".join(f"#{i}" for i in already)
            print(
                f"diagnose: warning: the archive already held this recording (the same window and requests) "
                f"as {kept}: its trend now counts it twice",
                file=sys.stderr,
            )
        if baseline is not None:
            comparison = compare_evidence(baseline, evidence, requests, args.change, args.expects)
            decisive = decisive_figures(comparison.figures, comparison.traffic)
            measured: dict[str, float | None] = {
                name: decisive[name].change
                for name in ("p50", "p99", "throughput", "error_rate", "gpu_mem_peak")
                if name in decisive
            }
            archive.add_comparison(args.baseline, entry, comparison, measured)
            print(f"diagnose: against #{args.baseline}: {comparison.headline}", file=sys.stderr)
            if args.expect:
                from diagnose.archive.views import measured_text

                print(
                    f"diagnose: expected {args.expect}; measured {measured_text(measured)}", file=sys.stderr
                )
    return ExitCode.OK
