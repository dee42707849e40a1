"""What every importer is: it recognises a file by its content and turns it into dump tables."""

from __future__ import annotations

import gzip
import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import pandas as pd

from diagnose.importers.mend import mend

HEAD_BYTES = 65_536


@dataclass
class Imported:
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)  # ts is epoch seconds (UTC)
    warnings: list[str] = field(default_factory=list)
    environment: dict[str, str] = field(default_factory=dict)  # driver, CUDA, ... for the manifest

    @property
    def rows(self) -> int:
        return sum(len(frame) for frame in self.tables.values())


@dataclass(frozen=True)
class Source:
    """A file offered to the importers: its text as its format wrote it, and its modification time.

    ``mended`` says what :func:`~diagnose.importers.mend.mend` undid to get that text (a prefix
    on every line, a hard wrap, ...), for the report.
    """

    name: str
    text: str
    mtime: float  # the only clock a line without a wall-clock stamp has
    mended: tuple[str, ...] = ()
    prefixes: tuple[str, ...] = ()  # who wrote the lines, from the prefixes taken off them

    @classmethod
    def from_path(cls, path: Path) -> Source:
        with open_maybe_gzipped(path) as handle:
            text = handle.read().decode("utf-8", errors="replace")
        mended = mend(text)
        return cls(path.name, mended.text, os.stat(path).st_mtime, mended.undone, mended.prefixes)


_GZIP_MAGIC = b"\x1f\x8b"


def open_maybe_gzipped(path: Path) -> IO[bytes] | gzip.GzipFile:
    """The file's bytes, decompressed where it is gzip (a rotated log, a profiler's .json.gz): by its
    content, not its name, like everything an importer is offered."""
    with open(path, "rb") as probe:
        gzipped = probe.read(2) == _GZIP_MAGIC
    if gzipped:
        return gzip.open(path, "rb")
    return open(path, "rb")  # noqa: SIM115 - the caller closes it


def text_head(path: Path, size: int) -> str | None:
    """The start of a text file (decompressed if gzip), or None for a binary one or an unreadable one."""
    try:
        with open_maybe_gzipped(path) as handle:
            head = handle.read(size)
    except (OSError, EOFError, zlib.error):  # a damaged gzip: BadGzipFile, a cut, a corrupt block
        return None
    if b"\x00" in head:
        return None
    return head.decode("utf-8", errors="replace")


class Importer:
    name: str = ""
    description: str = ""
    example: str = ""

    def recognise(self, head: str) -> bool:
        """``head``: the start of the file, mended like the text :meth:`read` gets."""
        raise NotImplementedError

    def read(self, source: Source, tz: str | None = None) -> Imported:
        """``tz``: the zone of times written without an offset (``--tz``); UTC when None."""
        raise NotImplementedError


class FileImporter(Importer):
    """An importer of files too large to hold as text (a profiler trace runs to hundreds of MB): it
    streams the file itself. What pasting does to text does not happen to such files, so nothing is
    mended; :meth:`read` (a pasted excerpt) still works, on the text."""

    def recognise_file(self, path: Path) -> bool:
        """For a binary file (no text head to recognise): whether this importer reads it."""
        return False

    def read_file(self, path: Path, tz: str | None = None) -> Imported:
        raise NotImplementedError


def local_epoch(stamp: pd.Timestamp | str, tz: str | None) -> float:
    """A time (written without an offset: in zone ``tz``, UTC when None) as epoch seconds.

    A time that cannot be one (a month 00, a year -1, a damaged string) is NaN, like any
    value that cannot be read: pasted evidence is often damaged, and one bad stamp must not
    lose the file.
    """
    try:
        parsed = pd.Timestamp(stamp)
        if not isinstance(parsed, pd.Timestamp):  # NaT
            return float("nan")
        if parsed.tzinfo is not None:
            return parsed.timestamp()
        local = parsed.tz_localize(tz or "UTC", ambiguous="NaT", nonexistent="NaT")
        return local.timestamp() if isinstance(local, pd.Timestamp) else float("nan")  # NaT: a skipped hour
    except (ValueError, OverflowError, TypeError, AttributeError):  # pandas' parse errors are ValueErrors
        return float("nan")


def local_epochs(stamps: pd.Series, tz: str | None) -> pd.Series:
    """Like :func:`local_epoch` for a column of naive datetimes (NaT stays missing)."""
    try:
        localized = stamps.dt.tz_localize(tz or "UTC", ambiguous="NaT", nonexistent="NaT")
        return (localized - pd.Timestamp(0, tz="UTC")).dt.total_seconds()
    except (ValueError, OverflowError):  # a stamp outside what pandas can hold: one at a time
        return pd.Series([local_epoch(stamp, tz) for stamp in stamps], index=stamps.index, dtype="float64")


def zone_note(what: str, tz: str | None) -> str:
    if tz:
        return f"{what} have no UTC offset: read in {tz} (--tz)"
    return f"{what} have no UTC offset: read as UTC (give their zone with --tz)"


def data_lines(text: str) -> list[str]:
    """Lines without the blank ones and without ``#`` comments (the corpus's source lines among them)."""
    return [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("# source:")]
