"""Where a report goes: its form, its file, and the pictures beside it."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TextIO

from diagnose.errors import InputError
from diagnose.units import counted

_SUFFIX_FORMATS = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".json": "json",
    ".html": "html",
    ".htm": "html",
    **dict.fromkeys(("", ".txt", ".text", ".log", ".out"), "text"),
}


def report_format(args: argparse.Namespace) -> str:
    """The report's form (``--format``, else ``-o``'s extension), once its rules and file are known usable."""
    if args.rules is not None and not args.rules.is_dir():
        raise InputError(f"{args.rules}: not a folder of rule files")
    if args.output is None:
        return args.format or "text"
    suffix = args.output.suffix.lower()
    if args.format is None and suffix not in _SUFFIX_FORMATS:
        raise InputError(
            f"{args.output}: diagnose writes text (.txt), Markdown (.md), HTML (.html) or JSON (.json), "
            f"not {suffix}; name the file so, or give --format"
        )
    ready_to_write(args.output)
    return args.format or _SUFFIX_FORMATS[suffix]


def ready_to_write(path: Path) -> None:
    """A report or export that cannot be written is found before the analysis, not after it; a folder
    it names that does not exist yet is made (``-o review/review.md``), as the archive makes its own."""
    if path.is_dir():
        raise InputError(f"{path}: is a folder; give a file name for the report")
    folder = path.parent
    existing = next(p for p in (folder, *folder.parents) if p.exists())
    if not existing.is_dir():
        raise InputError(f"{path}: {existing} is a file, not a folder")
    if not os.access(existing, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise InputError(f"{path}: permission denied")
    folder.mkdir(parents=True, exist_ok=True)


def pictures_beside(output: Path, draw) -> list[tuple[str, str, str]]:
    """Pictures beside a Markdown file (``review.md`` gets ``review.assets/*.png``), said where."""
    from diagnose.pictures import beside

    folder, links = beside(output, draw)
    if links:
        print(f"diagnose: {counted(len(links), 'picture')} written to {folder.resolve()}", file=sys.stderr)
    return links


def report_width(asked: int | None, to_file: bool) -> int | None:
    """The columns the text report's prose wraps to: ``--width`` (0: never), else ``COLUMNS``, else the
    terminal's where the report goes to one; None (lines as long as their content) into a file or a
    pipe, which has no width of its own."""
    if asked is not None:
        return asked or None
    if os.environ.get("COLUMNS", "").isdigit():
        return int(os.environ["COLUMNS"])
    return None if to_file else terminal_columns(sys.stdout)


def terminal_columns(stream: TextIO) -> int | None:
    """The width of the terminal ``stream`` writes to; None off a terminal or where it does not say."""
    try:
        columns = os.get_terminal_size(stream.fileno()).columns if stream.isatty() else 0
    except (OSError, ValueError, AttributeError):  # closed, replaced, or no file descriptor
        return None
    return columns or None
