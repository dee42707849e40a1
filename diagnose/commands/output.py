"""Where a report goes: its form, its file, and the pictures beside it."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from diagnose.errors import InputError

_SUFFIX_FORMATS = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".json": "json",
    ".html": "html",
    ".htm": "html",
}


def report_format(args: argparse.Namespace) -> str:
    """The report's form (``--format``, else ``-o``'s extension), once its rules and file are known usable."""
    if args.rules is not None and not args.rules.is_dir():
        raise InputError(f"{args.rules}: not a folder of rule files")
    suffix = args.output.suffix.lower() if args.output else ""
    if args.output is not None:
        check_writable(args.output)
    return args.format or _SUFFIX_FORMATS.get(suffix, "text")


def check_writable(path: Path) -> None:
    """A report or export that cannot be written is found before the analysis, not after it."""
    if path.is_dir():
        raise InputError(f"{path}: is a folder; give a file name for the report")
    folder = path.parent
    if not folder.is_dir():
        raise InputError(f"{folder}: no such folder for the report {path.name}")
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise InputError(f"{path}: permission denied")


def pictures_beside(output: Path, draw) -> list[tuple[str, str, str]]:
    """Pictures beside a Markdown file (``review.md`` gets ``review.assets/*.png``), said where."""
    from diagnose.pictures import beside

    folder, links = beside(output, draw)
    if links:
        print(f"diagnose: {len(links)} pictures written to {folder.resolve()}", file=sys.stderr)
    return links


def terminal_width() -> int:
    import shutil

    return shutil.get_terminal_size((100, 24)).columns if sys.stdout.isatty() else 100
