"""The ``diagnose`` command line: the dispatcher. stdout carries the report; stderr is for people.

Each sub-command lives in :mod:`diagnose.commands`; here is only what they share: the parser,
and the one place where an error becomes an exit code and a message.

Exit codes live in :class:`diagnose.errors.ExitCode`: 0 analysed, 1 a finding
at or above ``--fail-on``, 2 unusable input or arguments, 3 an internal error,
130 interrupted, 141 (quietly) the output's reader went away.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback

from diagnose import __version__
from diagnose.commands import COMMANDS
from diagnose.errors import DiagnoseError, ExitCode
from diagnose.processes.environment import use_worker_environment
from diagnose.processes.heap import leave_the_rest_to_exit, reuse_freed_memory

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
  diagnose load http://127.0.0.1:8000/v1/chat/completions -o load/   the knee, a soak, the setting
  diagnose serve --prometheus URL --data serve/ --token-file T   each Alertmanager alert arrives diagnosed
  diagnose alerts baseline/ -o rules.yml          alerting rules with thresholds from a baseline
  diagnose rules                                   list the rules
  diagnose rules check my-rules/                   validate your own rule folder
"""


def run() -> int:
    """The ``diagnose`` command: :func:`main`, then an exit that does not walk the heap again."""
    code = main()
    try:
        sys.stdout.flush()  # what is still buffered goes now, while a closed pipe can still be told
    except BrokenPipeError:
        code = _reader_gone()
    leave_the_rest_to_exit()
    return code


def _reader_gone() -> int:
    """``diagnose ... | head``: the reader went away. Exit quietly, as a tool killed by SIGPIPE does,
    and leave nothing for the interpreter to flush into the closed pipe at exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return ExitCode.READER_GONE


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
    except BrokenPipeError:
        return _reader_gone()
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
    subcommands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(subcommands)
    return parser
