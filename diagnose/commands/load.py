"""``diagnose load TARGET``: find the knee under realistic load, hold near it, set the concurrency."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from diagnose.commands.options import Subcommands, add_debug, positive
from diagnose.errors import ExitCode, InputError

_DESCRIPTION = (
    "Load TARGET as the capacity method says and report its knee. A baseline sends one request at a time "
    "(the run stops if the service does not answer it); steps of open-loop Poisson arrivals follow, each "
    "twice the last, until one does not keep up (requests fail, throughput stops following the offered "
    "rate, or a backlog builds); the bracket is then narrowed to --resolution. A soak at 70 % of the knee "
    "judges stability: P99's trend, stalls, errors and the server's memory. The setting to use is 70 % of "
    "the knee, as a rate and as a concurrency. Requests are a 70/20/10 mix of short, medium and long "
    "prompts, or your own (--prompts). Load is sent by Locust, in one process or, with --workers, by "
    "Locust's own workers on this or other machines (docs/load.md). The run's folder (-o) is a dump: "
    "every request in requests.jsonl, the result in capacity.json."
)
_EPILOG = """\
examples:
  diagnose load http://127.0.0.1:8000/v1/chat/completions -o load-0412/
  diagnose load http://gpu-7:8000/v1/completions --prompts prompts.jsonl --soak 30m -o load/
  diagnose load http://127.0.0.1:8700/generate --body body.json --step 20s --soak 0 -o quick/
  diagnose load --results results/*.json           the knee of vLLM/SGLang/genai-perf/Locust/k6 runs
  diagnose load http://gpu-7:8000/v1/chat/completions --workers 2 -o load/   then, twice:
      locust --worker -f $(diagnose load --locustfile) --master-host 127.0.0.1
"""
_LOCUSTFILE = Path(__file__).resolve().parents[1] / "load" / "locustfile.py"


def add_parser(commands: Subcommands) -> None:
    command = commands.add_parser(
        "load",
        help="find the knee under realistic load, hold near it (soak), and set the concurrency",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    command.add_argument(
        "target", nargs="?", help="the endpoint's URL (http://host:port/v1/chat/completions)"
    )
    command.add_argument("-o", "--out", type=Path, help="the run's folder (default: load-YYYYmmdd-HHMMSS)")
    command.add_argument(
        "--api",
        choices=("chat", "completions", "http"),
        help="how requests are written: OpenAI chat or completions, streamed; or any JSON endpoint "
        "(default: from the URL's path)",
    )
    command.add_argument(
        "--replay",
        type=Path,
        metavar="LOG",
        help="send a request log's pattern again (any log diagnose file reads, with request times): its gaps "
        "between arrivals scaled to each stage's rate, its prompt and answer lengths (not with --prompts)",
    )
    command.add_argument("--model", help="the OpenAI APIs' model (default: the first the server lists)")
    command.add_argument(
        "--body",
        type=Path,
        metavar="FILE",
        help='--api http: a JSON body whose "{{prompt}}" and "{{max_tokens}}" are filled in '
        '(default: {"prompt": ..., "max_tokens": ...})',
    )
    command.add_argument("--header", action="append", default=[], metavar="'NAME: VALUE'", help="repeatable")
    command.add_argument(
        "--prompts",
        type=Path,
        metavar="FILE",
        help='your prompts: JSON lines ({"prompt": ..., "max_tokens": 64, "size": "short"}) or text, one a '
        "line, drawn at random for each request (default: a built-in 70/20/10 short/medium/long mix that "
        "never sends a prompt twice: a caching engine answers repeats faster)",
    )
    command.add_argument(
        "--baseline", default="20s", metavar="TIME", help="one request at a time (default 20s)"
    )
    command.add_argument("--step", default="30s", metavar="TIME", help="each step of load (default 30s)")
    command.add_argument("--start-rate", type=positive, metavar="RPS", help="the first step's rate")
    command.add_argument(
        "--growth", type=float, default=2.0, help="each step's rate over the last (default 2)"
    )
    command.add_argument(
        "--resolution",
        type=float,
        default=0.15,
        help="narrow the knee's bracket to this share (default 0.15)",
    )
    command.add_argument("--max-steps", type=int, default=12, help="default 12")
    command.add_argument(
        "--soak", default="10m", metavar="TIME", help="the soak near the knee (default 10m; 0: none)"
    )
    command.add_argument(
        "--share",
        type=float,
        default=0.7,
        help="the soak's and the setting's share of the knee (default 0.7)",
    )
    command.add_argument("--timeout", default="60s", metavar="TIME", help="per request (default 60s)")
    command.add_argument("--seed", type=int, default=0, help="the arrivals' and prompts' draw (default 0)")
    command.add_argument(
        "--metrics-url",
        metavar="URL",
        help="the server's Prometheus metrics, read for its memory during the soak "
        "(default: TARGET's /metrics)",
    )
    command.add_argument(
        "--record",
        action="store_true",
        help="run on the server's host: record it through the run (diagnose record: CPU, GPUs, threads, "
        "the server's /metrics) into the run's server/ folder, and diagnose the steps at and past the knee",
    )
    command.add_argument(
        "--record-metrics",
        action="store_true",
        help="the server on another host: record its /metrics (--metrics-url) from here through the run "
        "(diagnose record --no-host: its own gauges, queue and KV cache, none of this machine's figures) "
        "into the run's server/ folder, and diagnose the steps at and past the knee",
    )
    command.add_argument(
        "--server-pid",
        type=int,
        action="append",
        default=[],
        metavar="PID",
        help="--record: the server's pid",
    )
    command.add_argument(
        "--server-log",
        type=Path,
        metavar="PATH",
        help="--record: the service's own request log, recorded too: its stages say which part saturates",
    )
    command.add_argument(
        "--workers", type=int, default=1, metavar="N", help="wait for N Locust workers and send from them"
    )
    command.add_argument(
        "--master-bind", default="127.0.0.1", help="--workers: where they connect (default here)"
    )
    command.add_argument("--master-port", type=int, default=5557, help="--workers: default 5557")
    command.add_argument(
        "--archive",
        action="store_true",
        help="keep the run in the performance archive under --name, judged against the last run of that "
        "name: exit 1 where the knee moved down beyond its interval (a weekly gate; docs/load.md)",
    )
    command.add_argument("--name", help="--archive: the standard load's name (default: the target's URL)")
    command.add_argument(
        "--archive-file", type=Path, metavar="FILE", help="--archive: the archive file (default: the usual)"
    )
    command.add_argument(
        "--format", choices=("text", "markdown", "json"), default="text", help="default: text"
    )
    command.add_argument(
        "--locustfile", action="store_true", help="print the locustfile Locust's workers run, and exit"
    )
    command.add_argument(
        "--results",
        nargs="+",
        type=Path,
        metavar="FILE",
        help="send nothing: read load tests already run (vLLM's or SGLang's benchmark results, genai-perf's "
        "or AIPerf's export, Locust's --csv files, k6's summary) and find their knee",
    )
    add_debug(command)
    command.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.locustfile:
        print(_LOCUSTFILE)
        return ExitCode.OK
    if args.results:
        if args.target:
            raise InputError("diagnose load: give the endpoint's URL or --results, not both")
        return _results(args)
    if not args.target:
        raise InputError("diagnose load: give the endpoint's URL, or --results FILE (see --help)")
    from diagnose.load.plan import to_json
    from diagnose.load.preflight import machine_note, plan_from
    from diagnose.load.workload import repeats_note

    if importlib.util.find_spec("locust") is None:
        raise InputError(
            "diagnose load sends its load with Locust, which is not installed here: "
            "pip install 'diagnose-inference[load]'"
        )
    out = args.out or Path(time.strftime("load-%Y%m%d-%H%M%S"))
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError(f"{out}: not an empty folder; a load run writes a new one")
    for option in ("server_pid", "server_log"):
        if getattr(args, option) and not args.record:
            raise InputError(f"--{option.replace('_', '-')} is for --record (recording the server's host)")
    if args.record and args.record_metrics:
        raise InputError(
            "--record and --record-metrics: give one (--record on the server's host, --record-metrics "
            "from another)"
        )
    if args.replay is not None and args.prompts is not None:
        raise InputError("--replay and --prompts: give one (a replay sends the log's own lengths)")
    target, settings, prompts = plan_from(args)
    replay = None
    if args.replay is not None:
        from dataclasses import asdict

        from diagnose.load.workload import read_replay

        if not args.replay.exists():
            raise InputError(f"--replay {args.replay}: no such file or folder")
        replay = read_replay(args.replay)
    out.mkdir(parents=True, exist_ok=True)
    repeats = repeats_note(prompts, args.prompts) if args.prompts is not None else None
    notes = [note for note in [machine_note(), replay.describe() if replay else None, repeats] if note]
    for note in notes:
        print(f"diagnose load: {note}", file=sys.stderr)
    plan = {
        "target": to_json(target),
        "settings": to_json(settings),
        "prompts": [to_json(p) for p in prompts],
        "replay": asdict(replay) if replay is not None else None,
        "metrics_url": args.metrics_url or f"{target.base}/metrics",
        "master_bind": args.master_bind,
        "master_port": args.master_port,
        "notes": notes,
    }
    recorder = (
        _recorder(out, plan["metrics_url"], args.server_pid, args.server_log, here=args.record)
        if args.record or args.record_metrics
        else None
    )
    try:
        with tempfile.TemporaryDirectory(prefix="diagnose-load-") as private:  # headers may hold a token:
            run_file = Path(private) / "run.json"  # never in the run's folder, which is a dump
            run_file.write_text(json.dumps(plan), encoding="utf-8")
            code = _engine(run_file, out)
    finally:
        if recorder is not None:
            _stop(recorder)
    if code != ExitCode.OK:
        if not any(out.iterdir()):
            out.rmdir()  # nothing measured: no folder left behind to mistake for a run
        return code
    from diagnose.load.report import RESULT_FILE, render_markdown, render_text

    result = json.loads((out / RESULT_FILE).read_text(encoding="utf-8"))
    if recorder is not None:
        from diagnose.load.knee_diagnosis import diagnose_knee

        print("diagnose load: diagnosing the steps at and past the knee from the recording", file=sys.stderr)
        result["knee_diagnosis"] = diagnose_knee(out, result)
        (out / RESULT_FILE).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    regressed = _archive(args, out, result) if args.archive else False
    if args.format == "json":
        print(json.dumps(result, indent=1))
    elif args.format == "markdown":
        print(render_markdown(result, out, _pictures(result, out)), end="")
    else:
        print(render_text(result, out), end="")
    return ExitCode.FINDING_AT_THRESHOLD if regressed else ExitCode.OK


def _pictures(result: dict, out: Path) -> list[tuple[str, str, str]]:
    """The curve and the soak drawn into the run's report.assets/, linked from where the report is read:
    the run's folder as given (a relative path stays relative)."""
    from diagnose.pictures.capacity import render_capacity_pictures

    pictures = render_capacity_pictures(result, out / "report.assets")
    return [(p.title, str(out / "report.assets" / p.path.name), p.alt) for p in pictures]


def _results(args: argparse.Namespace) -> int:
    """The knee of load tests already run: their files read, nothing sent."""
    from diagnose.load.results import read_results
    from diagnose.load.results_knee import analyse, render_text, to_json

    points = []
    for path in args.results:
        if not path.is_file():
            raise InputError(f"{path}: no such file")
        points += read_results(path)
    curve = analyse(points, args.share)
    if args.format == "json":
        print(json.dumps(to_json(curve), indent=1))
    elif args.format == "markdown":
        print(f"```\n{render_text(curve)}```")
    else:
        print(render_text(curve), end="")
    return ExitCode.OK


def _archive(args: argparse.Namespace, out: Path, result: dict) -> bool:
    """Judge the run against the last of its name, keep it, and write the judgement into capacity.json."""
    from diagnose.archive import Archive, default_path
    from diagnose.load.history import judge
    from diagnose.load.report import RESULT_FILE

    name = args.name or result["target"]["url"]
    with Archive(args.archive_file or default_path()) as archive:
        judgement = judge(name, result, archive.capacity_runs(name))
        result["history"] = judgement.to_json()
        archive.add_capacity(name, str(out.resolve()), result, judgement.regressed)
    (out / RESULT_FILE).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return judgement.regressed


def _recorder(out: Path, metrics_url: str, pids: list[int], log: Path | None, here: bool) -> subprocess.Popen:
    """``diagnose record`` into the run's server/ folder, until :func:`_stop`: of this host (``here``, the
    server's), or of the server's /metrics alone, read from afar."""
    from diagnose.load.knee_diagnosis import SERVER_FOLDER

    command = [sys.executable, "-m", "diagnose", "record", "-o", str(out / SERVER_FOLDER), "--quiet"]
    command += ["--metrics-url", metrics_url, *(f"--pid={pid}" for pid in pids)]
    command += ["--requests-log", str(log)] if log is not None else []
    command += [] if here else ["--no-host"]
    recorder = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)  # its first sample before the first request
    if recorder.poll() is not None:
        said = recorder.communicate()[1] or ""
        option = "--record" if here else "--record-metrics"
        raise InputError(f"{option}: diagnose record stopped at once: {said.strip()[-500:]}")
    return recorder


def _stop(recorder: subprocess.Popen) -> None:
    """Ctrl-C, as a person stops it: a recording cut short is a whole dump."""
    recorder.send_signal(signal.SIGINT)
    try:
        recorder.wait(timeout=30)
    except subprocess.TimeoutExpired:
        recorder.kill()
        recorder.wait()


def _engine(run_file: Path, out: Path) -> int:
    """The Locust engine in its own process (it patches the standard library with gevent)."""
    command = [sys.executable, "-m", "diagnose.load.engine", str(run_file), str(out)]
    child = subprocess.Popen(command, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        return child.wait()
    except KeyboardInterrupt:
        child.send_signal(signal.SIGINT)
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
        raise
