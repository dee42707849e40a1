"""``diagnose alerts BASELINE``: Prometheus alerting rules with thresholds from a baseline's variation."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from diagnose.commands.options import Subcommands, add_debug, add_prometheus_auth, prometheus_auth
from diagnose.errors import ExitCode, InputError

if TYPE_CHECKING:
    from diagnose.compare.evidence import Evidence

_DESCRIPTION = (
    "Write Prometheus alerting rules for the figures the method names (P99 latency, throughput, the GPU "
    "memory peak, and for text generation TTFT and TPOT), each threshold and for: set from BASELINE's own "
    "variation: the figure evaluated over --window every --every as Prometheus will, its median plus four "
    "robust spreads (never inside the baseline's own range), and for: the longest excursion the baseline "
    "made anyway (docs/serve.md). The expressions read the engine's own metric names, by instance, so each "
    "alert names the host diagnose serve pulls. BASELINE is a dump, or an archive entry (--archive-entry): "
    "its dump, or where that is gone the sample of requests the archive keeps."
)
_EPILOG = """\
examples:
  diagnose alerts baseline/ --engine vllm -o diagnose-rules.yml && promtool check rules diagnose-rules.yml
  diagnose alerts baseline/ --selector 'job="vllm"' --serve-url http://diagnose-serve:9177 \\
      --prometheus-rule diagnose-rules.k8s.yaml --namespace monitoring
  diagnose alerts --archive-entry 3 --window 10m -o rules.yml
"""


def add_parser(commands: Subcommands) -> None:
    command = commands.add_parser(
        "alerts",
        help="write Prometheus alerting rules whose thresholds a baseline's own variation sets",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    command.add_argument("baseline", nargs="?", type=Path, help="the baseline dump")
    command.add_argument(
        "--archive-entry", type=int, metavar="ID", help="the baseline: archive entry #ID's dump"
    )
    command.add_argument(
        "--archive", type=Path, metavar="FILE", help="with --archive-entry: the archive file"
    )
    command.add_argument(
        "--engine", help="whose metric names the rules read (default: the dump's engine source, as recorded)"
    )
    command.add_argument(
        "--window", default="5m", metavar="SPAN", help="each rule's range, rate[W] (default 5m)"
    )
    command.add_argument("--every", default="1m", metavar="SPAN", help="the evaluation interval (default 1m)")
    command.add_argument(
        "--selector",
        default="",
        metavar="MATCHERS",
        help="label matchers for every series, e.g. 'job=\"vllm\"'",
    )
    command.add_argument(
        "--serve-url", metavar="URL", help="diagnose serve's address: each rule links its latest report"
    )
    command.add_argument(
        "--buckets",
        action="append",
        type=_buckets,
        default=[],
        metavar="FIGURE=LE,...",
        help="a latency histogram's bucket bounds in seconds, as its le labels on /metrics (p99_latency, "
        "ttft_p99, tpot_p99), so that the baseline's P99 is interpolated as Prometheus will; once a figure",
    )
    command.add_argument(
        "--prometheus",
        metavar="URL",
        help="read each latency histogram's buckets (its le values) from this Prometheus, where --buckets "
        "does not give them",
    )
    add_prometheus_auth(command)
    command.add_argument("-o", "--output", type=Path, help="the rules file (default: standard output)")
    command.add_argument(
        "--prometheus-rule",
        type=Path,
        metavar="FILE",
        help="also write the rules as a Kubernetes PrometheusRule",
    )
    command.add_argument("--namespace", help="--prometheus-rule: the resource's namespace")
    command.add_argument("--tz", metavar="ZONE", help="zone of the baseline's naive times")
    add_debug(command)
    command.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from diagnose.alerting import (
        alerting_rules,
        baseline_series,
        check_selector,
        prometheus_rule,
        rules_file,
        threshold,
    )
    from diagnose.alerting.baseline import shown
    from diagnose.commands.output import ready_to_write
    from diagnose.dump import load_dump
    from diagnose.units import parse_duration

    path, archived = _baseline(args)
    window_s, every_s = parse_duration(args.window), parse_duration(args.every)
    if every_s > window_s:
        raise InputError(
            f"--every {args.every} is longer than --window {args.window}: windows would be skipped"
        )
    selector = check_selector(args.selector)
    for output in (args.output, args.prometheus_rule):
        if output is not None:
            ready_to_write(output)
    dump = load_dump(str(path), tz=args.tz) if archived is None else archived[0]
    engine = args.engine or _engine(dump.manifest.extra.get("sources") or {})
    if engine is None:
        raise InputError(
            f"{path}: its manifest names no serving engine: give --engine (vllm, sglang, tgi, triton, ...) "
            "so the rules read its metric names"
        )
    buckets = dict(args.buckets)
    if args.prometheus:
        buckets = {**_served_buckets(args, engine, selector), **buckets}
    series, missing = baseline_series(
        dump, window_s, every_s, buckets, 1.0 if archived is None else archived[1]
    )
    thresholds, unbounded = [], []
    for figure in series:
        found = threshold(figure, every_s)
        if found is None:
            unbounded.append(
                f"{figure.figure}: the baseline's own range reaches zero; no lower bound means anything"
            )
        else:
            thresholds.append(found)
    rules = alerting_rules(thresholds, engine, window_s, selector, str(path), args.serve_url)
    if not rules.rules:
        raise InputError(f"{path}: no figure to alert on: " + "; ".join(missing + unbounded + rules.skipped))
    text = rules_file(rules, every_s)
    if args.output is None:
        sys.stdout.write(text)
    else:
        args.output.write_text(text, encoding="utf-8")
    if args.prometheus_rule is not None:
        args.prometheus_rule.write_text(
            prometheus_rule(rules, every_s, namespace=args.namespace), encoding="utf-8"
        )
    for found in thresholds:
        print(
            f"diagnose: {found.figure}: {'above' if found.above else 'below'} "
            f"{shown(found.value, found.unit)} for {found.for_s:g} s ({found.reason}; from {found.source})",
            file=sys.stderr,
        )
    for reason in missing + unbounded + rules.skipped:
        print(f"diagnose: no rule for {reason}", file=sys.stderr)
    where = ", ".join(str(p) for p in (args.output, args.prometheus_rule) if p is not None)
    if where:
        print(f"diagnose: {len(rules.rules)} rules written to {where}", file=sys.stderr)
    return ExitCode.OK


def _served_buckets(args: argparse.Namespace, engine: str, selector: str) -> dict:
    """Each latency histogram's bucket bounds as the service exports them: the ``le`` values of its
    ``_bucket`` series in Prometheus over the last day (the first of the engine's names that has any)."""
    import math
    import time

    from diagnose.alerting import Figure
    from diagnose.alerting.rules import bucket_series
    from diagnose.pull import PrometheusClient

    auth = prometheus_auth(args)
    client = PrometheusClient(args.prometheus, auth, args.ca_file)
    now, found = time.time(), {}
    for figure in (Figure.P99_LATENCY, Figure.TTFT_P99, Figure.TPOT_P99):
        for name in bucket_series(figure, engine):
            values = client.label_values("le", f"{name}{{{selector}}}", now - 86400, now)
            bounds = sorted(b for b in map(_bound, values) if math.isfinite(b))
            if bounds:
                found[figure] = bounds
                print(
                    f"diagnose: {figure}: {len(bounds)} buckets of {name} from {args.prometheus}",
                    file=sys.stderr,
                )
                break
        else:
            print(f"diagnose: {figure}: no buckets found in {args.prometheus}", file=sys.stderr)
    return found


def _bound(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return float("nan")  # not a bucket bound: left out


def _buckets(text: str) -> tuple:
    from diagnose.alerting import Figure

    name, _, bounds = text.partition("=")
    latencies = ("p99_latency", "ttft_p99", "tpot_p99")
    try:
        values = [float(b) for b in bounds.split(",") if b.strip() and b.strip() != "+Inf"]
    except ValueError:
        values = []
    if name not in latencies or not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(
            f"expected FIGURE=LE,LE,... with FIGURE one of {', '.join(latencies)} and the bounds in seconds "
            f"(e.g. p99_latency=0.3,0.5,0.8,1,1.5,2,2.5,5,10), got {text!r}"
        )
    return Figure(name), sorted(values)


def _baseline(args: argparse.Namespace) -> tuple[Path, tuple | None]:
    """The baseline's dump, or where an archive entry's dump is gone, the entry's sample of requests as
    a dump of its own and the requests each row stands for."""
    if (args.baseline is None) == (args.archive_entry is None):
        raise InputError("give the baseline: a dump folder, or --archive-entry ID (not both)")
    if args.baseline is not None:
        if not args.baseline.exists():
            raise InputError(f"{args.baseline}: no such file or folder")
        return args.baseline, None
    from diagnose.archive import Archive, default_path

    with Archive(args.archive or default_path(), create=False) as archive:
        entry = archive.entry(args.archive_entry)
        path = Path(entry.dump)
        if path.exists():
            return path, None
        evidence = archive.evidence(entry.id)
    if "offset_s" not in evidence.samples:
        raise InputError(
            f"archive entry #{entry.id}'s dump {path} is gone, and the entry was archived before its "
            "requests' times were kept: give a dump of the same service"
        )
    return Path(f"archive #{entry.id}"), _sample_dump(entry.id, evidence)


def _sample_dump(entry: int, evidence: Evidence) -> tuple:
    """An archived baseline's even sample of requests as a dump's requests table, and how many requests
    each of its rows stands for."""
    import pandas as pd

    from diagnose.dump.model import Dump, Manifest

    columns = {name: values.astype("float64") for name, values in evidence.samples.items()}
    frame = pd.DataFrame({"ts": columns.pop("offset_s"), **columns})
    print(
        f"diagnose: archive #{entry}'s dump is gone: thresholds from its sample of {len(frame):,} of "
        f"{evidence.requests:,} requests (a sample's P99 varies more than all requests' would)",
        file=sys.stderr,
    )
    dump = Dump(f"archive #{entry} (its sample of requests)", {"requests": frame}, {}, Manifest())
    return dump, evidence.requests / max(1, len(frame))


def _engine(sources: dict) -> str | None:
    """The engine a dump's manifest recorded (``engine: {kind: "vllm /metrics ..."}``)."""
    from diagnose.engines.metrics import engine_maps

    known = engine_maps()
    for source in sources.values():
        kind = str((source or {}).get("kind", "")) if isinstance(source, dict) else ""
        first = kind.split(" ", 1)[0]
        if first in known:
            return first
    return None
