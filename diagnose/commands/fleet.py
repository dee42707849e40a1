"""``diagnose fleet merge``: the shards of one fleet sweep (``pull --all-instances --shard``) as one."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from diagnose.commands.options import Subcommands, add_debug
from diagnose.errors import ExitCode, InputError
from diagnose.units import counted


def add_parser(commands: Subcommands) -> None:
    command = commands.add_parser(
        "fleet",
        help="join the shards of a fleet sweep (pull --all-instances --shard K/N) into one fleet.md",
        description=(
            "A fleet swept in N shards (the pods of a Kubernetes Indexed Job, each running diagnose pull "
            "--all-instances --shard $JOB_COMPLETION_INDEX/N) leaves fleet-shard-K-of-N.json files; "
            "merge joins them into the fleet.json and fleet.md one sweep would have written, and names "
            "any shard that is missing (docs/pull.md)."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=(
            "examples:\n  diagnose fleet merge /shared/sweep/\n  diagnose fleet merge a/ b/ c/ d/ -o sweep/"
        ),
    )
    actions = command.add_subparsers(dest="action", metavar="ACTION", required=True)
    merge = actions.add_parser("merge", help="join the shards' fleet-shard-K-of-N.json into fleet.json")
    merge.add_argument(
        "shards", nargs="+", type=Path, metavar="PATH", help="folders (or files) of the shards"
    )
    merge.add_argument(
        "-o", "--output", type=Path, help="where to write fleet.json and fleet.md (default: the first folder)"
    )
    add_debug(merge)
    merge.set_defaults(handler=run)
    add_debug(command)


def run(args: argparse.Namespace) -> int:
    for path in args.shards:
        if not path.exists():
            raise InputError(f"{path}: no such file or folder")
    from diagnose.pull.fleet import merge

    output = args.output or (args.shards[0] if args.shards[0].is_dir() else args.shards[0].parent)
    results = merge(args.shards, output)
    failed = sum(result.problem is not None for result in results)
    print(
        f"diagnose: {counted(len(results), 'host')} ({failed} not analysed) merged into "
        f"{output / 'fleet.json'} and "
        f"{output / 'fleet.md'}",
        file=sys.stderr,
    )
    return ExitCode.OK
