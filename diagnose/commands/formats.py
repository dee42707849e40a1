"""``diagnose formats``: what ``diagnose file`` can read, and an example of each format."""

from __future__ import annotations

import argparse

from diagnose.commands.options import Subcommands
from diagnose.errors import ExitCode, InputError


def add_parser(commands: Subcommands) -> None:
    command = commands.add_parser(
        "formats",
        help="list the file formats diagnose file can read, with an example each",
        description=(
            "The dump's own tables, and the foreign files the importers recognise by their content. "
            "With a format's name: a whole example of it, as its writer writes it."
        ),
        epilog=(
            "examples:\n"
            "  diagnose formats                 every format, with the first line of its example\n"
            "  diagnose formats vmstat          vmstat's example whole (save it, then: diagnose file it)"
        ),
    )
    command.add_argument("name", nargs="?", help="a format's name, as the list shows it")
    command.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from diagnose.importers import IMPORTERS
    from diagnose.statements import builtin_catalogue

    importers = sorted(IMPORTERS, key=lambda importer: importer.name)
    if args.name is not None:
        chosen = next((importer for importer in importers if importer.name == args.name), None)
        if chosen is None:
            names = ", ".join(importer.name for importer in importers)
            raise InputError(f"no format named {args.name!r}; the formats are: {names}")
        print(chosen.example, end="")
        return ExitCode.OK
    print("dump tables: system, processes, gpu, gpu_processes, allocator, server, requests, events")
    print("  as .csv, .csv.gz, .jsonl, .jsonl.gz or .parquet (docs/dump-format.md), plus manifest.yaml")
    print()
    print("foreign files, recognised by their content (diagnose formats NAME shows a whole example):")
    for importer in importers:
        first = next((line.strip() for line in importer.example.splitlines() if line.strip()), "")
        shown = first if len(first) <= 100 else first[:97] + "..."
        print(f"  {importer.name:<24} {importer.description}")
        print(f"  {'':<24} e.g. {shown}")
    statements = builtin_catalogue()
    writers = sorted({s.writer for s in statements}, key=str.lower)
    print()
    print(f"on any line of any file: {len(statements)} statements of a cause, from their writers' source")
    print(f"  ({', '.join(writers)}; statements/README.md)")
    return ExitCode.OK
