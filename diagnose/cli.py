"""The ``diagnose`` command line. stdout carries the report; stderr is for people.

Exit codes live in :class:`diagnose.errors.ExitCode`: 0 analysed, 1 a finding
at or above ``--fail-on``, 2 unusable input or arguments, 3 an internal error.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from pathlib import Path

from diagnose import __version__
from diagnose.errors import DiagnoseError, ExitCode, InputError
from diagnose.heap import leave_the_rest_to_exit, reuse_freed_memory
from diagnose.process_env import use_worker_environment

_EPILOG = """\
examples:
  diagnose file incident-0412/                     readable report in the terminal
  diagnose file incident-0412/ --format markdown   paste into the incident review
  diagnose file incident-0412/ --format json       for scripts and CI
  diagnose file incident-0412/ --tui               explore it in the full-screen view
  diagnose compare before/ after/                  did the change help, under comparable conditions?
  diagnose archive add after/ --label v1.4-int8    keep its figures in the performance archive
  diagnose record -o incident/ --duration 15m      record this host into a dump
  diagnose record -o incidents/ --ring 30m --trigger 'p99_ms > 500 for 10s'   flight recorder
  diagnose pull --prometheus URL --instance gpu-7 --from now-1h -o d/   a window from Prometheus
  diagnose live                                    watch this host as the hypotheses form
  diagnose rules                                   list the rules
  diagnose rules check my-rules/                   validate your own rule folder
"""


def run() -> int:
    """The ``diagnose`` command: :func:`main`, then an exit that does not walk the heap again."""
    code = main()
    leave_the_rest_to_exit()
    return code


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return ExitCode.BAD_INPUT
    reuse_freed_memory()
    use_worker_environment()
    try:
        return args.handler(args)
    except DiagnoseError as error:
        print(f"diagnose: error: {error}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print("diagnose: interrupted", file=sys.stderr)
        return ExitCode.INTERRUPTED
    except OSError as error:  # the environment's: a missing folder, no permission, a full disk
        print(f"diagnose: error: {_os_error(error)}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    except Exception as error:  # noqa: BLE001 - the one place a bug becomes exit 3
        if getattr(args, "debug", False):
            traceback.print_exc()
        else:
            print(
                f"diagnose: internal error: {type(error).__name__}: {error}. This is a bug; "
                "please report it with the output of the same command run with --debug.",
                file=sys.stderr,
            )
        return ExitCode.INTERNAL_ERROR


def _os_error(error: OSError) -> str:
    where = error.filename if error.filename is not None else ""
    reason = (error.strerror or str(error)).lower()
    return f"{where}: {reason}" if where else reason


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="diagnose",
        description="Root-cause diagnosis for AI inference services: observe, hypothesise, verify.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"diagnose {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    file_cmd = commands.add_parser(
        "file",
        help="analyse a dump folder offline",
        description="Analyse a dump folder (docs/dump-format.md); report ranked root-cause hypotheses.",
    )
    file_cmd.add_argument("dump", help="the dump folder")
    file_cmd.add_argument(
        "--format",
        choices=("text", "markdown", "html", "json"),
        help="report format (default: from the -o file's extension, .md, .html or .json; else text)",
    )
    file_cmd.add_argument("-o", "--output", type=Path, help="write the report to this file instead of stdout")
    file_cmd.add_argument(
        "--rules", type=Path, metavar="DIR", help="use the rules in DIR instead of the built-in ones"
    )
    file_cmd.add_argument(
        "--slo-p99-ms",
        type=_positive,
        metavar="MS",
        help="the P99 latency target (overrides the manifest's slo_p99_ms)",
    )
    file_cmd.add_argument(
        "--fail-on",
        type=_score,
        metavar="SCORE",
        help="exit 1 when a hypothesis scores at least SCORE (0-1), for CI gates",
    )
    file_cmd.add_argument(
        "--tz",
        type=_zone,
        metavar="ZONE",
        help="zone of times that foreign files (vLLM logs, nvidia-smi, journal) write without an offset, "
        "e.g. Asia/Shanghai or +08:00 (default: UTC)",
    )
    file_cmd.add_argument(
        "--no-plots",
        action="store_true",
        help="no pictures: by default a Markdown report written with -o FILE gets them in FILE's .assets "
        "folder, and an HTML report inline",
    )
    file_cmd.add_argument(
        "--tui",
        action="store_true",
        help="explore the dump in the full-screen view instead of printing a report",
    )
    _add_view_args(file_cmd, default_window="all")
    file_cmd.add_argument("--debug", action="store_true", help="show a traceback on internal errors")
    file_cmd.set_defaults(handler=_run_file)

    _add_compare_cmd(commands)
    _add_archive_cmd(commands)

    record_cmd = commands.add_parser(
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
    record_cmd.add_argument(
        "-o",
        "--output",
        type=Path,
        required=True,
        help="the dump folder to create (with --ring: the folder for the ring and the incident dumps)",
    )
    record_cmd.add_argument(
        "--duration", metavar="TIME", help="stop after TIME (90s, 15m, 1h); default: until Ctrl-C"
    )
    _add_collection_args(record_cmd)
    _add_flight_args(record_cmd)
    record_cmd.add_argument("--force", action="store_true", help="write into an existing, non-empty folder")
    record_cmd.add_argument("--debug", action="store_true", help="show a traceback on internal errors")
    record_cmd.set_defaults(handler=_run_record)

    _add_live_cmd(commands)
    _add_pull_cmd(commands)

    formats_cmd = commands.add_parser(
        "formats",
        help="list the file formats diagnose file can read, with an example each",
        description="The dump's own tables, and the foreign files the importers recognise by their content.",
    )
    formats_cmd.set_defaults(handler=_run_formats)

    rules_cmd = commands.add_parser(
        "rules",
        help="list, check or explain the rules",
        description=(
            "list: the rules in use; show ID: a rule's YAML and where it is; check DIR: validate a "
            "rule folder; test [DIR]: run the rule tests in DIR/tests/ (default: the built-in rules'); "
            "facts: what rules may use; docs DIR: write one Markdown page per rule, generated from its YAML."
        ),
    )
    rules_cmd.add_argument(
        "action", nargs="?", choices=("list", "show", "check", "test", "facts", "docs"), default="list"
    )
    rules_cmd.add_argument("folder", nargs="?", help="the rule folder (check, docs) or the rule's id (show)")
    rules_cmd.add_argument("--rules", type=Path, metavar="DIR", help="list the rules in DIR")
    rules_cmd.add_argument("--debug", action="store_true", help="show a traceback on internal errors")
    rules_cmd.set_defaults(handler=_run_rules)
    return parser


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


def _add_compare_cmd(commands: argparse._SubParsersAction) -> None:
    compare_cmd = commands.add_parser(
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
            "  diagnose compare baseline/ candidate/ --fail-on-regression p99:+5%,throughput:-3%"
        ),
    )
    compare_cmd.add_argument(
        "dumps",
        nargs="+",
        metavar="DUMP",
        help="BEFORE AFTER: the dump recorded before the change and the one after it "
        "(with --baseline, only AFTER)",
    )
    compare_cmd.add_argument(
        "--baseline",
        type=int,
        metavar="ID",
        help="compare against recording #ID of the performance archive instead of a BEFORE dump",
    )
    compare_cmd.add_argument(
        "--archive", type=Path, metavar="FILE", help="the archive file (default: see diagnose archive --help)"
    )
    compare_cmd.add_argument(
        "--format",
        choices=("text", "markdown", "html", "json"),
        help="report format (default: from the -o file's extension, .md, .html or .json; else text)",
    )
    compare_cmd.add_argument(
        "--no-plots", action="store_true", help="no pictures (the latency ECDF and each stage's change)"
    )
    compare_cmd.add_argument("-o", "--output", type=Path, help="write the comparison to this file")
    compare_cmd.add_argument(
        "--fail-on-regression",
        metavar="FIGURE:[+|-]PCT,...",
        help="exit 1 when a figure moves the bad way beyond its tolerance and significantly, "
        "e.g. p99:+5%%,throughput:-3%%,gpu_mem_peak:+10%% (error_rate in percentage points)",
    )
    compare_cmd.add_argument(
        "--rules", type=Path, metavar="DIR", help="use the rules in DIR instead of the built-in ones"
    )
    compare_cmd.add_argument("--tz", type=_zone, metavar="ZONE", help="zone of foreign files' naive times")
    compare_cmd.add_argument("--debug", action="store_true", help="show a traceback on internal errors")
    compare_cmd.set_defaults(handler=_run_compare)


def _run_compare(args: argparse.Namespace) -> int:
    """Paths and the gate are checked before the analysis stack is imported: errors answer at once."""
    wanted = 1 if args.baseline is not None else 2
    if len(args.dumps) != wanted:
        raise InputError(
            "compare takes BEFORE AFTER, or --baseline ID AFTER"
            + (f"; got {len(args.dumps)} dumps" if len(args.dumps) != wanted else "")
        )
    for path in args.dumps:
        if not Path(path).exists():
            raise InputError(f"{path}: no such file or folder")
    output_format = _output_format(args)
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
        after, after_requests = measure_path(args.dumps[0], args.rules, args.tz, salt=1)
    else:
        before, after, after_requests = measure_both(
            args.dumps[0], args.dumps[1], args.rules, args.tz, second=second or False
        )
    comparison = compare_evidence(before, after, after_requests)
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


def _add_archive_cmd(commands: argparse._SubParsersAction) -> None:
    archive_cmd = commands.add_parser(
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
            "  diagnose archive list\n"
            "  diagnose archive show 2\n"
            "  diagnose archive trend --metric p99\n"
            "  diagnose compare --baseline 1 tonight/"
        ),
    )
    archive_cmd.add_argument("action", choices=("add", "list", "show", "trend"))
    archive_cmd.add_argument("target", nargs="?", help="the dump (add) or the recording's id (show)")
    archive_cmd.add_argument("--archive", type=Path, metavar="FILE", help="the archive file")
    archive_cmd.add_argument("--label", help="add: a name for the recording, e.g. v1.4-int8")
    archive_cmd.add_argument("--change", help="add: what was changed, e.g. 'INT8 weights'")
    archive_cmd.add_argument("--expect", help="add: the gain expected, e.g. 'p99 -30%%'")
    archive_cmd.add_argument("--note", help="add: anything else: side effects, who, why")
    archive_cmd.add_argument(
        "--baseline", type=int, metavar="ID", help="add: also compare with recording #ID and keep the result"
    )
    archive_cmd.add_argument("--metric", default="p99", help="trend: the figure to follow (default p99)")
    archive_cmd.add_argument(
        "--chart", type=Path, metavar="FILE.png", help="trend: also draw the figure across the recordings"
    )
    archive_cmd.add_argument("--rules", type=Path, metavar="DIR", help="add: diagnose with the rules in DIR")
    archive_cmd.add_argument(
        "--tz", type=_zone, metavar="ZONE", help="add: zone of foreign files' naive times"
    )
    archive_cmd.add_argument("--debug", action="store_true", help="show a traceback on internal errors")
    archive_cmd.set_defaults(handler=_run_archive)


def _run_archive(args: argparse.Namespace) -> int:
    from diagnose.archive import Archive, default_path
    from diagnose.archive.views import entries_table, entry_text, trend_table

    path = args.archive or default_path()
    if args.action == "add":
        if args.target is None or not Path(args.target).exists():
            raise InputError(
                f"archive add needs a dump: {args.target or 'none given'}: no such file or folder"
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
                _check_writable(args.chart)
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
        evidence, requests = measure_path(args.target, args.rules, args.tz, salt=None)
        entry = archive.add(evidence, args.label, args.change, args.expect, args.note)
        print(f"diagnose: archived {args.target} as #{entry} in {path}", file=sys.stderr)
        if baseline is not None:
            comparison = compare_evidence(baseline, evidence, requests)
            decisive = decisive_figures(comparison.figures, comparison.traffic)
            measured = {
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


def _comparison_pictures(
    output: Path | None, form: str, comparison, before, after
) -> list[tuple[str, str, str]]:
    """The latency ECDF and the stage changes: beside a Markdown file, inside an HTML page."""
    from diagnose.pictures import in_memory, render_comparison_pictures
    from diagnose.report.html import inline

    latencies = [side.samples.get("latency_ms") for side in (before, after)]

    def draw(folder: Path):
        return render_comparison_pictures(comparison, *latencies, folder)

    return inline(in_memory(draw)) if form == "html" else _pictures_beside(output, draw)


def _add_collection_args(command: argparse.ArgumentParser) -> None:
    """What to sample: shared by ``record`` and ``live``."""
    command.add_argument(
        "--interval", type=_positive, default=1.0, metavar="S", help="seconds between samples (default 1)"
    )
    command.add_argument(
        "--pid",
        type=int,
        action="append",
        default=[],
        metavar="PID",
        help="a server process to always watch (repeatable): busiest thread, restarts",
    )
    command.add_argument(
        "--requests-log", metavar="PATH", help="a request log the service appends to (JSONL or CSV)"
    )
    command.add_argument(
        "--requests-format",
        choices=("auto", "jsonl", "csv"),
        default="auto",
        help="the log's format (default: from its extension)",
    )
    command.add_argument(
        "--map",
        metavar="SRC=COL,...",
        help="rename the log's fields to the dump's columns, e.g. duration=latency_ms,time=ts",
    )
    command.add_argument(
        "--metrics-url",
        metavar="URL",
        help="a Prometheus /metrics endpoint of vLLM, Triton, TGI, SGLang or MindIE",
    )
    command.add_argument(
        "--engine",
        choices=("auto", "vllm", "triton", "tgi", "sglang", "mindie"),
        default="auto",
        help="which engine serves --metrics-url (default: recognised from the metric names)",
    )
    command.add_argument(
        "--metrics-map",
        metavar="METRIC=COL,...",
        help=(
            "record a service's own metrics as server columns, e.g. "
            "app_queue_size=queue_depth,app_batch_size=batch_size (counters become rates, "
            "histograms their mean over each interval)"
        ),
    )
    command.add_argument(
        "--stages",
        metavar="NAME=KIND,...",
        help=(
            "the kinds (cpu, gpu, wait) of request-log stages whose names do not say it, written to the "
            "manifest, e.g. forward=cpu for a model run on the CPU"
        ),
    )
    command.add_argument(
        "--env",
        metavar="NAME=VALUE,...",
        help="versions and facts to keep in the manifest's environment, e.g. vllm=0.6.3,model=llama-3-8b "
        "(the recorder adds Python, the serving packages it can see, the driver and the server's "
        "command line)",
    )
    command.add_argument(
        "--setting",
        metavar="NAME=VALUE,...",
        help="the server's settings, kept in the manifest for diagnose compare, e.g. max_batch_size=32",
    )
    command.add_argument(
        "--allocator-log",
        metavar="PATH",
        help="the JSONL file written by diagnose.collectors.allocator.record_allocator in the service",
    )
    command.add_argument(
        "--log",
        action="append",
        default=[],
        metavar="PATH",
        help="a log to watch for CUDA OOM messages and NVIDIA Xid errors (repeatable)",
    )
    command.add_argument(
        "--top", type=int, default=10, metavar="N", help="busiest processes to record (default 10)"
    )
    command.add_argument("--no-gpu", action="store_true", help="do not read GPUs")
    command.add_argument(
        "--strict",
        action="store_true",
        help="exit 2 at start if a source given above cannot be read (default: warn and record the rest)",
    )


def _add_pull_cmd(commands: argparse._SubParsersAction) -> None:
    pull_cmd = commands.add_parser(
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
            "      --all-instances --job 'gpu-.*' --from now-12h --to now -o sweep/   # + sweep/fleet.md"
        ),
    )
    pull_cmd.add_argument("--prometheus", required=True, metavar="URL", help="the server's base URL")
    which = pull_cmd.add_mutually_exclusive_group(required=True)
    which.add_argument("--instance", metavar="HOST", help="the host (its instance label, any port)")
    which.add_argument(
        "--all-instances",
        action="store_true",
        help="every host with an up series: one dump each in -o, and fleet.md/fleet.json",
    )
    pull_cmd.add_argument("--job", metavar="REGEX", help="--all-instances: only the hosts of these jobs")
    pull_cmd.add_argument(
        "--from", dest="start", required=True, metavar="TIME", help="ISO-8601 with zone, epoch, now-1h"
    )
    pull_cmd.add_argument("--to", dest="end", default="now", metavar="TIME", help="as --from (default now)")
    pull_cmd.add_argument(
        "--step", metavar="SPAN", help="resolution (default: the scrape interval, read from the data)"
    )
    pull_cmd.add_argument("-o", "--output", type=Path, required=True, help="the dump folder to create")
    pull_cmd.add_argument("--bearer-token-file", type=Path, metavar="FILE", help="a bearer token in FILE")
    pull_cmd.add_argument("--bearer-token-env", metavar="VAR", help="a bearer token in $VAR")
    pull_cmd.add_argument("--basic-auth-file", type=Path, metavar="FILE", help="user:password in FILE")
    pull_cmd.add_argument("--basic-auth-env", metavar="VAR", help="user:password in $VAR")
    pull_cmd.add_argument("--ca-file", type=Path, metavar="FILE", help="the CA bundle for an https URL")
    pull_cmd.add_argument(
        "--timeout", type=_positive, default=30.0, metavar="S", help="seconds per request (default 30)"
    )
    pull_cmd.add_argument("--rules", type=Path, metavar="DIR", help="--all-instances: diagnose with DIR")
    pull_cmd.add_argument("--debug", action="store_true", help="show a traceback on internal errors")
    pull_cmd.set_defaults(handler=_run_pull)


def _run_pull(args: argparse.Namespace) -> int:
    from diagnose.pull import Auth, PrometheusClient, pull, sweep
    from diagnose.pull.pull import parse_time
    from diagnose.units import parse_duration

    if args.job and not args.all_instances:
        raise InputError("--job selects hosts for --all-instances; with --instance it does not apply")
    auth = Auth.from_options(
        args.bearer_token_file, args.bearer_token_env, args.basic_auth_file, args.basic_auth_env
    )
    client = PrometheusClient(args.prometheus, auth, args.ca_file, args.timeout)
    start, end = parse_time(args.start), parse_time(args.end)
    step = parse_duration(args.step) if args.step else None
    say = lambda line: print(line, file=sys.stderr)  # noqa: E731
    if args.all_instances:
        results = sweep(client, start, end, args.output, args.job, step, args.rules, say=say)
        failed = [r for r in results if r.problem]
        print(
            f"diagnose: {len(results) - len(failed)} of {len(results)} hosts pulled and analysed into "
            f"{args.output}/; the summary: {args.output / 'fleet.md'}",
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


def _add_live_cmd(commands: argparse._SubParsersAction) -> None:
    live_cmd = commands.add_parser(
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
    live_cmd.add_argument(
        "--replay", metavar="DUMP", help="play this dump folder instead of sampling the host"
    )
    live_cmd.add_argument(
        "--speed", type=_positive, default=1.0, metavar="X", help="replay speed, x real time (default 1)"
    )
    live_cmd.add_argument("--record", type=Path, metavar="DIR", help="also write what is sampled as a dump")
    live_cmd.add_argument("--force", action="store_true", help="let --record write into a non-empty folder")
    live_cmd.add_argument(
        "--rules", type=Path, metavar="DIR", help="use the rules in DIR instead of the built-in ones"
    )
    live_cmd.add_argument("--slo-p99-ms", type=_positive, metavar="MS", help="the P99 latency target")
    _add_view_args(live_cmd, default_window="15m")
    _add_collection_args(live_cmd)
    live_cmd.add_argument("--debug", action="store_true", help="show a traceback on internal errors")
    live_cmd.set_defaults(handler=_run_live)


def _add_view_args(command: argparse.ArgumentParser, default_window: str) -> None:
    command.add_argument(
        "--window",
        default=default_window,
        metavar="TIME",
        help=f"analyse only the last TIME of it (90s, 15m, 1h, or all; default {default_window}); "
        "w cycles it in the view",
    )
    command.add_argument(
        "--refresh",
        type=_positive,
        metavar="S",
        help="seconds between analyses in the view (default 5)",
    )
    command.add_argument(
        "--export-dir",
        type=Path,
        metavar="DIR",
        help="where m writes the Markdown report, said on screen as an absolute path "
        "(default: the current folder)",
    )


_SUFFIX_FORMATS = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".json": "json",
    ".html": "html",
    ".htm": "html",
}


def _run_file(args: argparse.Namespace) -> int:
    """Arguments and paths are checked before the analysis stack is imported: errors answer at once."""
    if not Path(args.dump).exists():
        raise InputError(f"{args.dump}: no such file or folder")
    window_s = _window_arg(args.window)
    if args.tui:
        return _run_view(args, replay=args.dump, speed=0.0)
    for option in ("refresh", "export_dir"):
        if getattr(args, option) is not None:
            raise InputError(f"--{option.replace('_', '-')} applies to the view only; add --tui")
    output_format = _output_format(args)
    from diagnose.detect import launch

    # Before the analysis stack is imported, so that the helper's imports overlap this process's.
    helper_process = launch.start_for_files(args.dump)
    try:
        from diagnose.pipeline import analyse_path
        from diagnose.report import RENDERERS
        from diagnose.report.evidence_lines import dead_source_lines
    except BaseException:  # the analysis takes the helper over below; until then it is ours to stop
        if helper_process is not None:
            helper_process.kill()
        raise

    dump, analysis = analyse_path(
        args.dump,
        rules_dir=args.rules,
        slo_p99_ms=args.slo_p99_ms,
        tz=args.tz,
        window_s=window_s,
        helper=helper_process if helper_process is not None else False,  # the files were checked above
    )
    report = analysis.report
    if output_format == "text":
        text = RENDERERS["text"](report, width=_terminal_width() if args.output is None else 100)
    elif output_format == "markdown" and args.output is not None and not args.no_plots:
        text = RENDERERS["markdown"](report, _pictures_beside(args.output, _report_pictures(analysis, dump)))
    elif output_format == "html":
        if args.no_plots:
            text = RENDERERS["html"](report, [])
        else:
            from diagnose.pictures import in_memory

            text = RENDERERS["html"](report, in_memory(_report_pictures(analysis, dump)))
    else:
        text = RENDERERS[output_format](report)
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


def _output_format(args: argparse.Namespace) -> str:
    """The report's form (``--format``, else ``-o``'s extension), once its rules and file are known usable."""
    if args.rules is not None and not args.rules.is_dir():
        raise InputError(f"{args.rules}: not a folder of rule files")
    suffix = args.output.suffix.lower() if args.output else ""
    if args.output is not None:
        _check_writable(args.output)
    return args.format or _SUFFIX_FORMATS.get(suffix, "text")


def _report_pictures(analysis, dump):
    """What draws a report's pictures into a folder."""
    from diagnose.pictures import render_pictures

    return lambda folder: render_pictures(analysis.report, analysis.spikes, dump, folder)


def _pictures_beside(output: Path, draw) -> list[tuple[str, str, str]]:
    """Pictures beside a Markdown file (``review.md`` gets ``review.assets/*.png``), said where."""
    from diagnose.pictures import beside

    folder, links = beside(output, draw)
    if links:
        print(f"diagnose: {len(links)} pictures written to {folder.resolve()}", file=sys.stderr)
    return links


def _window_arg(text: str | None) -> float | None:
    """``--window``: seconds, or None for the whole dump."""
    from diagnose.units import parse_duration

    if text is None or text.strip().lower() == "all":
        return None
    return parse_duration(text)


def _check_writable(path: Path) -> None:
    """A report or export that cannot be written is found before the analysis, not after it."""
    if path.is_dir():
        raise InputError(f"{path}: is a folder; give a file name for the report")
    folder = path.parent
    if not folder.is_dir():
        raise InputError(f"{folder}: no such folder for the report {path.name}")
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise InputError(f"{path}: permission denied")


def _terminal_width() -> int:
    import shutil

    return shutil.get_terminal_size((100, 24)).columns if sys.stdout.isatty() else 100


def _run_record(args: argparse.Namespace) -> int:
    import signal
    import threading

    from diagnose.collectors.recorder import record
    from diagnose.collectors.writer import DiskFull
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
    flight = _flight_recorder(args)
    options = _record_options(args, None if flight else args.output)
    options.duration_s = parse_duration(args.duration) if args.duration else None
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    if flight is not None:
        signal.signal(signal.SIGUSR1, lambda *_: flight.request_dump("SIGUSR1"))
        print(flight.describe(), file=sys.stderr)
    until = f"for {args.duration}" if args.duration else "until Ctrl-C"
    print(f"diagnose: recording to {args.output} every {args.interval:g} s {until}", file=sys.stderr)
    try:
        summary = record(options, stop, say=lambda line: print(line, file=sys.stderr), sink=flight)
    except DiskFull as error:
        raise DiagnoseError(
            f"{args.output}: the disk is full ({error}); recording stopped, "
            "the dump holds what was written before"
        ) from None
    finally:
        if flight is not None:
            flight.close()  # a no-op when record() closed it; releases the ring when it failed to start
    if flight is not None:
        dumps = ", ".join(map(str, flight.written)) or "none"
        print(
            f"diagnose: recorded {summary.samples} samples into the ring; incident dumps: {dumps}",
            file=sys.stderr,
        )
    else:
        print(
            f"diagnose: recorded {summary.samples} samples to {args.output}"
            + (f" ({summary.skipped_ticks} late ticks skipped)" if summary.skipped_ticks else "")
            + f"; analyse it with: diagnose file {args.output}",
            file=sys.stderr,
        )
    for line in summary.dead_sources:
        print(f"diagnose: warning: recorded without {line}", file=sys.stderr)
    return ExitCode.OK


def _flight_recorder(args: argparse.Namespace):
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
            raise InputError(f"{', '.join(given)} need --ring SPAN: they set up the flight recorder")
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
    return FlightRecorder(options, args.interval, say=lambda line: print(line, file=sys.stderr))


def _run_live(args: argparse.Namespace) -> int:
    if args.replay and args.record:
        raise DiagnoseError("--replay plays a dump that is already recorded; --record does not apply to it")
    return _run_view(args, replay=args.replay, speed=args.speed)


def _run_view(args: argparse.Namespace, replay: str | None, speed: float) -> int:
    """The full-screen view. Textual is imported only here, so reports and recording never load it."""
    from diagnose.judge import default_rules_dir, load_rules

    window_s = _window_arg(args.window)
    export_dir = (args.export_dir or Path.cwd()).resolve()
    if not export_dir.is_dir():
        raise InputError(f"{export_dir}: not a folder; --export-dir needs an existing folder")
    if not os.access(export_dir, os.W_OK):
        raise InputError(f"{export_dir}: permission denied; m could not write its report there")
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


def _replay_feed(args: argparse.Namespace, path: str, speed: float):
    from diagnose.dump import load_dump
    from diagnose.live.feed import ReplayFeed

    dump = load_dump(path, tz=getattr(args, "tz", None))
    for warning in dump.warnings:
        print(f"diagnose: warning: {warning}", file=sys.stderr)
    return ReplayFeed(dump, speed=speed, from_start=speed > 0)


def _live_feed(args: argparse.Namespace, window_s: float | None):
    from diagnose.live.feed import LiveFeed

    feed = LiveFeed(_record_options(args, args.record), keep_s=max(window_s or 3600.0, 3600.0))
    feed.start()
    return feed


def _record_options(args: argparse.Namespace, output: Path | None):
    """The collection options ``record`` and ``live`` share."""
    from diagnose.collectors.recorder import RecordOptions
    from diagnose.collectors.requests_log import parse_map

    return RecordOptions(
        output=output,
        interval_s=args.interval,
        pids=tuple(args.pid),
        requests_log=args.requests_log,
        requests_format=args.requests_format,
        column_map=parse_map(args.map),
        metrics_url=args.metrics_url,
        engine=args.engine,
        metrics_map=_metrics_map(args.metrics_map),
        stage_kinds=_stage_kinds(args.stages),
        environment=parse_map(args.env, "--env", "NAME=VALUE"),
        settings=parse_map(args.setting, "--setting", "NAME=VALUE"),
        allocator_log=args.allocator_log,
        logs=tuple(args.log),
        top=args.top,
        gpu=not args.no_gpu,
        force=args.force,
        strict=args.strict,
    )


def _metrics_map(text: str | None) -> dict[str, str]:
    from diagnose.collectors.requests_log import parse_map
    from diagnose.dump.schema import COLUMNS

    mapping = parse_map(text, "--metrics-map", "METRIC=COLUMN")
    known = [c for c in COLUMNS["server"] if c != "ts"]
    for column in mapping.values():
        if column not in known:
            raise InputError(f"--metrics-map: {column!r} is not a server column; one of: {', '.join(known)}")
    return mapping


def _stage_kinds(text: str | None) -> dict[str, str]:
    from diagnose.collectors.requests_log import parse_map
    from diagnose.facts.stages import KINDS

    kinds = parse_map(text, "--stages", "NAME=KIND")
    for name, kind in kinds.items():
        if kind.lower() not in KINDS:
            expected = f"NAME=KIND pairs, KIND one of {', '.join(KINDS)}"
            raise InputError(f"--stages: expected {expected}; got {f'{name}={kind}'!r}")
    return {name.removeprefix("stage_").removesuffix("_ms"): kind.lower() for name, kind in kinds.items()}


def _run_formats(args: argparse.Namespace) -> int:
    from diagnose.importers import IMPORTERS

    print("dump tables: system, processes, gpu, gpu_processes, allocator, server, requests, events")
    print("  as .csv, .csv.gz, .jsonl, .jsonl.gz or .parquet (docs/dump-format.md), plus manifest.yaml")
    print()
    print("foreign files, recognised by their content:")
    for importer in IMPORTERS:
        print(f"  {importer.name:<24} {importer.description}")
        print(f"  {'':<24} e.g. {importer.example}")
    return ExitCode.OK


def _run_rules(args: argparse.Namespace) -> int:
    from diagnose.facts.catalogue import CATALOGUE
    from diagnose.judge import default_rules_dir, load_rules
    from diagnose.judge.ids import ROOT_CAUSE_IDS

    if args.action == "show":
        if args.folder is None:
            raise InputError("rules show needs a rule id: diagnose rules show ID (diagnose rules lists them)")
        rules = {rule.id: rule for rule in load_rules(args.rules or default_rules_dir())}
        if args.folder not in rules:
            raise InputError(f"no rule {args.folder!r}; the rules are: {', '.join(sorted(rules))}")
        rule = rules[args.folder]
        print(f"# {rule.source_file}")
        sys.stdout.write(Path(rule.source_file).read_text(encoding="utf-8"))
        return ExitCode.OK
    if args.folder is not None:
        args.folder = Path(args.folder)
    if args.action == "facts":
        for name, spec in CATALOGUE.items():
            print(f"{name:<42} {spec.unit:<6} {spec.meaning}  [needs {spec.needs}]")
        return ExitCode.OK
    if args.action == "check":
        if args.folder is None:
            raise DiagnoseError("rules check needs a folder: diagnose rules check DIR")
        rules = load_rules(args.folder)
        for rule in rules:
            note = "" if rule.id in ROOT_CAUSE_IDS else "  (id not in the standard list: document it)"
            print(f"ok  {rule.path}  {rule.id}{note}")
        print(f"{len(rules)} rule(s) valid")
        return ExitCode.OK
    if args.action == "test":
        from diagnose.judge.testing import run_rule_tests

        folder = args.folder or args.rules or default_rules_dir()
        results = run_rule_tests(load_rules(folder), folder / "tests")
        for result in results:
            mark = "ok  " if result.passed else "FAIL"
            print(f"{mark} {Path(result.file).name}: {result.case}: {result.got}")
        failed = sum(not r.passed for r in results)
        print(f"{len(results) - failed} passed, {failed} failed")
        return ExitCode.FINDING_AT_THRESHOLD if failed else ExitCode.OK
    if args.action == "docs":
        from diagnose.judge.pages import rule_page

        if args.folder is None:
            raise DiagnoseError("rules docs needs a folder to write the pages into: diagnose rules docs DIR")
        args.folder.mkdir(parents=True, exist_ok=True)
        for rule in load_rules(args.rules or default_rules_dir()):
            (args.folder / f"{rule.id}.md").write_text(rule_page(rule), encoding="utf-8")
        print(f"wrote the rule pages to {args.folder}")
        return ExitCode.OK
    folder = args.rules or args.folder or default_rules_dir()
    for rule in load_rules(folder):
        print(f"{rule.id:<26} {rule.title}")
    return ExitCode.OK


def _zone(text: str) -> str:
    import pandas as pd

    try:
        pd.Timestamp("2026-01-01").tz_localize(text)
    except (ValueError, TypeError, KeyError, LookupError):
        raise argparse.ArgumentTypeError(
            f"unknown time zone {text!r}: use a name such as Europe/Paris"
        ) from None
    return text


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _score(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"a score is between 0 and 1, got {text!r}")
    return value
