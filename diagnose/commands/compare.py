"""``diagnose compare BEFORE AFTER``: did a change help, under comparable conditions?"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from diagnose.commands.options import Subcommands, add_debug, root_cause, zone
from diagnose.commands.output import pictures_beside, report_format
from diagnose.errors import ExitCode, InputError


def add_parser(commands: Subcommands) -> None:
    command = commands.add_parser(
        "compare",
        help="compare two dumps: did a change really help, under comparable conditions?",
        description=(
            "Compare a dump recorded before a change with one recorded after it: percentiles, "
            "throughput, errors, per-stage times and memory with confidence intervals; whether the "
            "traffic and the environment were the same (and the latency at the same length mix when "
            "not); which hypotheses appeared or went; and one verdict (docs/compare.md)."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=(
            "examples:\n"
            "  diagnose compare before/ after/\n"
            "  diagnose compare before/ after/ -o review.md\n"
            "  diagnose compare before/ after/ --change 'warm-up before traffic' "
            "--expects cold-start-contamination\n"
            "  diagnose compare baseline/ candidate/ --fail-on-regression p99:+5%,throughput:-3%"
        ),
    )
    command.add_argument(
        "dumps",
        nargs="+",
        metavar="DUMP",
        help="BEFORE AFTER: the dump recorded before the change and the one after it "
        "(with --baseline, only AFTER)",
    )
    command.add_argument(
        "--baseline",
        type=int,
        metavar="ID",
        help="compare against recording #ID of the performance archive instead of a BEFORE dump",
    )
    command.add_argument(
        "--archive", type=Path, metavar="FILE", help="the archive file (default: see diagnose archive --help)"
    )
    command.add_argument(
        "--format",
        choices=("text", "markdown", "html", "json"),
        help="report format (default: from the -o file's extension, .md, .html or .json; else text)",
    )
    command.add_argument(
        "--no-plots", action="store_true", help="no pictures (the latency ECDF and each stage's change)"
    )
    command.add_argument(
        "--change",
        metavar="TEXT",
        help="what was changed between the two, e.g. 'torch.cuda.empty_cache() after each request': "
        "a change that leaves P99 worse is then named a pseudo-optimisation",
    )
    command.add_argument(
        "--expects",
        type=root_cause,
        metavar="ID",
        help="the hypothesis of the before side's diagnosis the change was to fix, e.g. "
        "cold-start-contamination: say what the fix delivered against the gain the diagnosis expected "
        "(a fix that delivered nothing is named a pseudo-optimisation)",
    )
    command.add_argument("-o", "--output", type=Path, help="write the comparison to this file")
    command.add_argument(
        "--fail-on-regression",
        metavar="FIGURE:[+|-]PCT,...",
        help="exit 1 when a figure moves the bad way beyond its tolerance and significantly, "
        "e.g. p99:+5%%,throughput:-3%%,gpu_mem_peak:+10%% (error_rate in percentage points)",
    )
    command.add_argument(
        "--rules", type=Path, metavar="DIR", help="use the rules in DIR instead of the built-in ones"
    )
    command.add_argument("--tz", type=zone, metavar="ZONE", help="zone of foreign files' naive times")
    add_debug(command)
    command.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Paths and the gate are checked before the analysis stack is imported: errors answer at once."""
    wanted = 1 if args.baseline is not None else 2
    if len(args.dumps) != wanted:
        given = f"{len(args.dumps)} dump{'s' if len(args.dumps) != 1 else ''}"
        raise InputError(f"compare takes BEFORE AFTER, or --baseline ID AFTER; got {given}")
    for path in args.dumps:
        if not Path(path).exists():
            raise InputError(f"{path}: no such file or folder")
    output_format = report_format(args)
    from diagnose.compare import parallel

    # Before the analysis stack is imported, so that the second process's imports overlap this one's.
    second = parallel.start_if_worth_it(args.dumps[0], args.rules, args.tz) if args.baseline is None else None
    try:
        from diagnose.compare import compare_evidence, measure_both, measure_path
        from diagnose.compare.render import render
        from diagnose.compare.verdict import gate, parse_gate

        tolerances = parse_gate(args.fail_on_regression) if args.fail_on_regression is not None else None
    except BaseException:  # measure_both takes the process over below; until then it is ours to stop
        if second is not None:
            second.stop()
        raise

    if args.baseline is not None:
        from diagnose.archive import Archive, default_path

        with Archive(args.archive or default_path(), create=False) as archive:
            before = archive.evidence(args.baseline)
        after, after_requests = measure_path(args.dumps[0], args.rules, args.tz)
    else:
        before, after, after_requests = measure_both(
            args.dumps[0], args.dumps[1], args.rules, args.tz, second=second or False
        )
    comparison = compare_evidence(before, after, after_requests, args.change, args.expects)
    trips, absent = gate(tolerances, comparison.figures, comparison.traffic) if tolerances else ([], [])
    pictures = None
    if output_format == "html" or (output_format == "markdown" and args.output is not None):
        pictures = (
            None
            if args.no_plots
            else _comparison_pictures(args.output, output_format, comparison, before, after)
        )
    text = render(comparison, output_format, trips if tolerances else None, pictures)
    if args.output is not None:
        args.output.write_text(text, encoding="utf-8")
        print(f"diagnose: {output_format} comparison written to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    for warning in comparison.warnings:
        print(f"diagnose: warning: {warning}", file=sys.stderr)
    if tolerances is None:
        return ExitCode.OK
    for name in absent:
        print(f"diagnose: warning: --fail-on-regression: {name}: not gated", file=sys.stderr)
    if not comparison.comparable:
        reasons = "; ".join(comparison.reasons)
        print(
            f"diagnose: warning: the gate compared dumps that are not comparable: {reasons}", file=sys.stderr
        )
    if trips:
        print("diagnose: --fail-on-regression: " + "; ".join(t.text for t in trips), file=sys.stderr)
        return ExitCode.FINDING_AT_THRESHOLD
    return ExitCode.OK


def _comparison_pictures(
    output: Path | None, form: str, comparison, before, after
) -> list[tuple[str, str, str]]:
    """The latency ECDF and the stage changes: beside a Markdown file, inside an HTML page."""
    from diagnose.pictures import in_memory, render_comparison_pictures
    from diagnose.report.html import inline

    before_latency, after_latency = (side.samples.get("latency_ms") for side in (before, after))

    def draw(folder: Path):
        return render_comparison_pictures(comparison, before_latency, after_latency, folder)

    if form == "html" or output is None:
        return inline(in_memory(draw))
    return pictures_beside(output, draw)
