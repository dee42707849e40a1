"""``diagnose formats``: what ``diagnose file`` can read."""

from __future__ import annotations

import argparse

from diagnose.commands.options import Subcommands
from diagnose.errors import ExitCode


def add_parser(commands: Subcommands) -> None:
    command = commands.add_parser(
        "formats",
        help="list the file formats diagnose file can read, with an example each",
        description="The dump's own tables, and the foreign files the importers recognise by their content.",
    )
    command.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from diagnose.importers import IMPORTERS
    from diagnose.statements import builtin_catalogue

    print("dump tables: system, processes, gpu, gpu_processes, allocator, server, requests, events")
    print("  as .csv, .csv.gz, .jsonl, .jsonl.gz or .parquet (docs/dump-format.md), plus manifest.yaml")
    print()
    print("foreign files, recognised by their content:")
    for importer in IMPORTERS:
        print(f"  {importer.name:<24} {importer.description}")
        print(f"  {'':<24} e.g. {importer.example}")
    statements = builtin_catalogue()
    writers = sorted({s.writer for s in statements}, key=str.lower)
    print()
    print(f"on any line of any file: {len(statements)} statements of a cause, from their writers' source")
    print(f"  ({', '.join(writers)}; statements/README.md)")
    return ExitCode.OK
