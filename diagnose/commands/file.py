"""``diagnose file DUMP``: analyse a dump offline and write the report."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from diagnose.commands.live import run_view
from diagnose.commands.options import (
    Subcommands,
    add_debug,
    add_view_args,
    positive,
    score,
    window_seconds,
    zone,
)
from diagnose.commands.output import pictures_beside, report_format, report_width
from diagnose.commands.status_line import StatusLine, Ticker
from diagnose.errors import ExitCode, InputError


def add_parser(commands: Subcommands) -> None:
    command = commands.add_parser(
        "file",
        help="analyse a dump folder offline",
        description=(
            "Analyse a dump (docs/dump-format.md): a folder of tables and foreign files (logs, scrapes, "
            "nvidia-smi output; `diagnose formats` lists them), or one such file alone. Report the "
            "ranked root-cause hypotheses with their evidence."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=(
            "examples:\n"
            "  diagnose file incident-0412/\n"
            "  diagnose file incident-0412/ -o review.md          Markdown, its pictures in review.assets/\n"
            "  diagnose file vllm.log                             one pasted file is a dump too\n"
            "  diagnose file incident-0412/ --fail-on 0.7         exit 1 when a finding scores 0.7 (CI)\n"
            "  diagnose file incident-0412/ --tui                 explore it in the full-screen view"
        ),
    )
    command.add_argument(
        "dump", help="the dump folder, or one file read as a dump of that file alone (a log, a scrape)"
    )
    command.add_argument(
        "--format",
        choices=("text", "markdown", "html", "json"),
        help="report format (default: from the -o file's extension, .md, .html or .json; else text)",
    )
    command.add_argument("-o", "--output", type=Path, help="write the report to this file instead of stdout")
    command.add_argument(
        "--width",
        type=int,
        metavar="COLUMNS",
        help="wrap the text report's prose to COLUMNS (0: never); default: the terminal's width on a "
        "terminal, no wrapping into a file or a pipe",
    )
    command.add_argument(
        "--rules", type=Path, metavar="DIR", help="use the rules in DIR instead of the built-in ones"
    )
    command.add_argument(
        "--slo-p99-ms",
        type=positive,
        metavar="MS",
        help="the P99 latency target (overrides the manifest's slo_p99_ms)",
    )
    command.add_argument(
        "--fail-on",
        type=score,
        metavar="SCORE",
        help="exit 1 when a hypothesis scores at least SCORE (0-1), for CI gates",
    )
    command.add_argument(
        "--tz",
        type=zone,
        metavar="ZONE",
        help="zone of times that foreign files (vLLM logs, nvidia-smi, journal) write without an offset, "
        "e.g. Asia/Shanghai or +08:00 (default: UTC)",
    )
    command.add_argument(
        "--no-plots",
        action="store_true",
        help="no pictures: by default a Markdown report written with -o FILE gets them in FILE's .assets "
        "folder, and an HTML report inline",
    )
    command.add_argument(
        "--tui",
        action="store_true",
        help="explore the dump in the full-screen view instead of printing a report",
    )
    command.add_argument(
        "--quiet",
        action="store_true",
        help="no status line while a long read or analysis runs (none is drawn off a terminal)",
    )
    add_view_args(command, default_window="all")
    add_debug(command)
    command.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Arguments and paths are checked before the analysis stack is imported: errors answer at once."""
    if not Path(args.dump).exists():
        raise InputError(f"{args.dump}: no such file or folder")
    window_s = window_seconds(args.window)
    if args.tui:
        return run_view(args, replay=args.dump, speed=0.0)
    for option in ("refresh", "export_dir"):
        if getattr(args, option) is not None:
            raise InputError(f"--{option.replace('_', '-')} applies to the view only; add --tui")
    output_format = report_format(args)
    from diagnose.detect import launch

    # Before the analysis stack is imported, so that the helper's imports overlap this process's.
    helper_process = launch.start_for_files(args.dump)
    try:
        from diagnose.pipeline import analyse_path
        from diagnose.report.evidence_lines import dead_source_lines
    except BaseException:  # the analysis takes the helper over below; until then it is ours to stop
        if helper_process is not None:
            helper_process.kill()
        raise

    with Ticker(StatusLine.for_terminal(args.quiet), "diagnose") as ticker:
        dump, analysis = analyse_path(
            args.dump,
            rules_dir=args.rules,
            slo_p99_ms=args.slo_p99_ms,
            tz=args.tz,
            window_s=window_s,
            helper=helper_process if helper_process is not None else False,  # the files were checked above
            progress=ticker.step,
        )
        ticker.step(f"writing the {output_format} report")
        text = _rendered(args, output_format, dump, analysis)
    report = analysis.report
    if args.output is not None:
        args.output.write_text(text, encoding="utf-8")
        print(f"diagnose: {output_format} report written to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    for warning in report.evidence.warnings:
        print(f"diagnose: warning: {warning}", file=sys.stderr)
    for line in dead_source_lines(report.evidence):
        print(f"diagnose: warning: the recording holds nothing from {line}", file=sys.stderr)
    if args.fail_on is not None:
        tripped = [h for h in report.hypotheses if h.score >= args.fail_on]
        if tripped:
            named = ", ".join(f"{h.id} ({h.score:.2f})" for h in tripped)
            print(f"diagnose: --fail-on {args.fail_on:g}: {named}", file=sys.stderr)
            return ExitCode.FINDING_AT_THRESHOLD
    return ExitCode.OK


def _rendered(args: argparse.Namespace, output_format: str, dump, analysis) -> str:
    from diagnose.report import render_html, render_json, render_markdown, render_text

    report = analysis.report
    if output_format == "text":
        return render_text(report, width=report_width(args.width, to_file=args.output is not None))
    if output_format == "markdown":
        with_pictures = args.output is not None and not args.no_plots
        pictures = pictures_beside(args.output, _report_pictures(analysis, dump)) if with_pictures else None
        return render_markdown(report, pictures)
    if output_format == "html":
        if args.no_plots:
            return render_html(report, [])
        from diagnose.pictures import in_memory

        return render_html(report, in_memory(_report_pictures(analysis, dump)))
    return render_json(report)


def _report_pictures(analysis, dump):
    """What draws a report's pictures into a folder."""
    from diagnose.pictures import render_pictures

    return lambda folder: render_pictures(analysis.report, analysis.spikes, dump, folder)
