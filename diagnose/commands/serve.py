"""``diagnose serve``: Alertmanager's webhook in; each alert's host pulled, diagnosed and kept."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

from diagnose.commands.options import Subcommands, add_debug, add_prometheus_auth, count, prometheus_auth
from diagnose.errors import ExitCode, InputError

_DESCRIPTION = (
    "A small web service for Alertmanager's webhook (docs/serve.md). For each firing alert whose "
    "instance label names a host, the window around the alert's start is pulled from --prometheus, "
    "diagnosed, and kept: report.md with its pictures, report.json and report.html in --data/reports/, "
    "served at /reports/FINGERPRINT-START, with an index of recent alerts at /. An alert re-sent is "
    "diagnosed once; the queue is an SQLite file in --data, so a restart loses nothing accepted. Every "
    "request needs the token or basic-auth pair given here, as Alertmanager's http_config sends it."
)
_EPILOG = """\
examples:
  diagnose serve --prometheus http://prometheus:9090 --data /var/lib/diagnose-serve \\
      --token-file /etc/diagnose/serve-token
  diagnose serve --prometheus https://thanos.internal --prometheus-bearer-token-file ~/.thanos-token \\
      --data serve/ --basic-auth-file ~/.serve-login --listen 0.0.0.0:9177 --workers 4 \\
      --archive serve/archive.sqlite --notify http://chat-bridge:8080/diagnose

  Alertmanager's receiver:
    receivers:
      - name: diagnose
        webhook_configs:
          - url: http://diagnose-serve:9177/alerts
            http_config: {authorization: {credentials_file: /etc/alertmanager/diagnose-token}}
"""


def add_parser(commands: Subcommands) -> None:
    command = commands.add_parser(
        "serve",
        help="receive Alertmanager's alerts and have each one's diagnosis waiting when the page is opened",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    command.add_argument(
        "--prometheus", required=True, metavar="URL", help="where to pull each alert's host from"
    )
    command.add_argument("--data", type=Path, required=True, metavar="DIR", help="the queue and the reports")
    command.add_argument(
        "--listen", default="127.0.0.1:9177", metavar="HOST:PORT", help="the address (default 127.0.0.1:9177)"
    )
    command.add_argument("--token-file", type=Path, metavar="FILE", help="accept this bearer token (in FILE)")
    command.add_argument("--token-env", metavar="VAR", help="accept this bearer token (in $VAR)")
    command.add_argument(
        "--basic-auth-file", type=Path, metavar="FILE", help="accept user:password (in FILE)"
    )
    command.add_argument("--basic-auth-env", metavar="VAR", help="accept user:password (in $VAR)")
    add_prometheus_auth(command, "prometheus-")
    command.add_argument(
        "--before", default="30m", metavar="SPAN", help="window before the alert's start (default 30m)"
    )
    command.add_argument(
        "--after", default="5m", metavar="SPAN", help="window after it, or up to now (default 5m)"
    )
    command.add_argument(
        "--step", metavar="SPAN", help="the pull's resolution (default: the scrape interval)"
    )
    command.add_argument(
        "--workers",
        type=count,
        default=2,
        metavar="N",
        help="alerts diagnosed at once, a process each (default 2)",
    )
    command.add_argument(
        "--queue-max",
        type=count,
        default=1000,
        metavar="N",
        help="alerts waiting at most; past it a notification gets 503 and Alertmanager sends it again "
        "(default 1000)",
    )
    command.add_argument(
        "--max-body", type=count, default=4 << 20, metavar="BYTES", help="the largest body (default 4 MiB)"
    )
    command.add_argument(
        "--instance-label",
        default="instance",
        metavar="LABEL",
        help="the alert label that names the host to pull (default instance)",
    )
    command.add_argument("--rules", type=Path, metavar="DIR", help="diagnose with the rules in DIR")
    command.add_argument(
        "--archive", type=Path, metavar="FILE", help="also keep each diagnosis in this archive"
    )
    command.add_argument("--notify", metavar="URL", help="post each diagnosis's top hypotheses here (JSON)")
    command.add_argument(
        "--public-url",
        metavar="URL",
        help="this service's address as readers reach it, for links (default: --listen)",
    )
    add_debug(command)
    command.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from diagnose.pull import Auth, PrometheusClient
    from diagnose.units import parse_duration

    missing = [name for name in ("starlette", "uvicorn") if importlib.util.find_spec(name) is None]
    if missing:
        raise InputError(
            f"diagnose serve needs {' and '.join(missing)}, not installed here: "
            "pip install 'diagnose-inference[serve]'"
        )
    host, port = _address(args.listen)
    accepted = []
    if args.token_file or args.token_env:
        accepted.append(Auth.from_options(args.token_file, args.token_env))
    if args.basic_auth_file or args.basic_auth_env:
        accepted.append(
            Auth.from_options(basic_auth_file=args.basic_auth_file, basic_auth_env=args.basic_auth_env)
        )
    if not accepted:
        raise InputError(
            "diagnose serve answers only authenticated requests: give --token-file (or --token-env) and/or "
            "--basic-auth-file (or --basic-auth-env), and the same in Alertmanager's http_config"
        )
    pulling = prometheus_auth(args, "prometheus-")
    PrometheusClient(args.prometheus, pulling, args.ca_file)  # a bad URL is said now, not at the first alert
    for option in ("rules", "ca_file"):
        given = getattr(args, option)
        if given is not None and not given.exists():
            raise InputError(f"--{option.replace('_', '-')} {given}: no such file or folder")
    data = args.data
    try:
        (data / "reports").mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise InputError(f"--data {data}: cannot be made ({error.strerror})") from None
    from diagnose.serve import ServeConfig, Settings, serve

    settings = Settings(
        prometheus=args.prometheus,
        reports=(data / "reports").resolve(),
        auth=pulling,
        ca_file=args.ca_file,
        before_s=parse_duration(args.before),
        after_s=parse_duration(args.after),
        step_s=parse_duration(args.step) if args.step else None,
        rules=args.rules.resolve() if args.rules else None,
        archive=args.archive.resolve() if args.archive else None,
    )
    config = ServeConfig(
        settings=settings,
        store=(data / "alerts.sqlite").resolve(),
        credentials=tuple(accepted),
        workers=args.workers,
        queue_bound=args.queue_max,
        max_body_bytes=args.max_body,
        instance_label=args.instance_label,
        notify_url=args.notify,
        public_url=args.public_url or f"http://{args.listen}",
    )
    print(f"diagnose: serving Alertmanager's webhook at http://{host}:{port}/alerts", file=sys.stderr)
    serve(config, host, port)
    return ExitCode.OK


def _address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise InputError(f"--listen: expected HOST:PORT, e.g. 127.0.0.1:9177 or 0.0.0.0:9177, got {text!r}")
    return host.strip("[]") or "0.0.0.0", int(port)
