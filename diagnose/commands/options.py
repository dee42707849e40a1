"""Argument types and the option groups several commands share."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from diagnose.errors import InputError

if TYPE_CHECKING:
    from diagnose.pull import Auth

Subcommands = argparse._SubParsersAction  # what ``add_subparsers`` returns: each command adds itself to it


def add_debug(command: argparse.ArgumentParser) -> None:
    """``--debug``, on every command: the one way to see a bug's traceback instead of exit 3's request."""
    command.add_argument("--debug", action="store_true", help="show a traceback on internal errors")


def add_prometheus_auth(command: argparse.ArgumentParser, prefix: str = "") -> None:
    """How to reach a Prometheus: a bearer token or ``user:password``, each from a file or a variable
    (never a flag, which ``ps`` and the shell's history show), and a CA bundle. ``prefix``:
    ``prometheus-`` where the command also takes credentials of its own (``serve``)."""
    command.add_argument(
        f"--{prefix}bearer-token-file", type=Path, metavar="FILE", help="a bearer token in FILE"
    )
    command.add_argument(f"--{prefix}bearer-token-env", metavar="VAR", help="a bearer token in $VAR")
    command.add_argument(
        f"--{prefix}basic-auth-file", type=Path, metavar="FILE", help="user:password in FILE"
    )
    command.add_argument(f"--{prefix}basic-auth-env", metavar="VAR", help="user:password in $VAR")
    command.add_argument("--ca-file", type=Path, metavar="FILE", help="the CA bundle for an https URL")


def prometheus_auth(args: argparse.Namespace, prefix: str = "") -> Auth:
    """The :class:`diagnose.pull.Auth` the options of :func:`add_prometheus_auth` give."""
    from diagnose.pull import Auth

    key = prefix.replace("-", "_")
    return Auth.from_options(
        getattr(args, f"{key}bearer_token_file"),
        getattr(args, f"{key}bearer_token_env"),
        getattr(args, f"{key}basic_auth_file"),
        getattr(args, f"{key}basic_auth_env"),
    )


def count(text: str) -> int:
    """A whole number of 1 or more (workers, hosts at once, a bound)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of 1 or more, got {text!r}")
    return value


def add_collection_args(command: argparse.ArgumentParser) -> None:
    """What to sample: shared by ``record`` and ``live``."""
    command.add_argument(
        "--interval", type=positive, default=1.0, metavar="S", help="seconds between samples (default 1)"
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
        "--no-host",
        action="store_true",
        help="the service runs on another machine: record only what it gives from afar (--metrics-url, "
        "--requests-log), none of this host's CPU, processes, GPUs or kernel logs",
    )
    command.add_argument(
        "--strict",
        action="store_true",
        help="exit 2 at start if a source given above cannot be read (default: warn and record the rest)",
    )


def add_view_args(command: argparse.ArgumentParser, default_window: str) -> None:
    command.add_argument(
        "--window",
        default=default_window,
        metavar="TIME",
        help=f"analyse only the last TIME of it (90s, 15m, 1h, or all; default {default_window}); "
        "w cycles it in the view",
    )
    command.add_argument(
        "--refresh",
        type=positive,
        metavar="S",
        help="seconds between analyses in the view (default 5)",
    )
    command.add_argument(
        "--export-dir",
        type=Path,
        metavar="DIR",
        help="where m writes the Markdown report, said on screen as an absolute path "
        "(default: $XDG_STATE_HOME/diagnose/exports, ~/.local/state/diagnose/exports where unset)",
    )


def record_options(args: argparse.Namespace, output: Path | None):
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
        metrics_map=metrics_map(args.metrics_map),
        stage_kinds=_stage_kinds(args.stages),
        environment=parse_map(args.env, "--env", "NAME=VALUE"),
        settings=parse_map(args.setting, "--setting", "NAME=VALUE"),
        allocator_log=args.allocator_log,
        logs=tuple(args.log),
        top=args.top,
        gpu=not args.no_gpu,
        host=not args.no_host,
        force=args.force,
        strict=args.strict,
    )


def metrics_map(text: str | None) -> dict[str, str]:
    """``--metrics-map``: a service's own metric -> server column, each column checked."""
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


def window_seconds(text: str | None) -> float | None:
    """``--window``: seconds, or None for the whole dump."""
    from diagnose.units import parse_duration

    if text is None or text.strip().lower() == "all":
        return None
    return parse_duration(text)


def root_cause(text: str) -> str:
    """A root-cause id of the contract (``--expects``), checked before any work."""
    from diagnose.judge.ids import root_cause_ids

    if text not in root_cause_ids():
        raise argparse.ArgumentTypeError(f"unknown root cause {text!r}: one of {', '.join(root_cause_ids())}")
    return text


def zone(text: str) -> str:
    import pandas as pd

    try:
        pd.Timestamp("2026-01-01").tz_localize(text)
    except (ValueError, TypeError, KeyError, LookupError):
        raise argparse.ArgumentTypeError(
            f"unknown time zone {text!r}: use a name such as Europe/Paris"
        ) from None
    return text


def positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def score(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"a score is between 0 and 1, got {text!r}")
    return value
