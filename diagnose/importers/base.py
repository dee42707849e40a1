"""What every importer is: it recognises a file by its content and turns it into dump tables."""

from __future__ import annotations

import gzip
import os
import zlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path
from typing import IO

import pandas as pd

from diagnose.importers.mend import Mended, mend
from diagnose.importers.undone import Undone

HEAD_BYTES = 65_536
EXAMPLES = Path(__file__).with_name("examples")  # one file of each text format, as its writer writes it
# What a line pasted into markdown has around it: quotes, code spans, emphasis, a table's bars (strip it)
MARKDOWN_WRAPPING = " \t`>*|"


@dataclass(frozen=True)
class Cadence:
    """How often a table's writer samples, where the gaps between its rows are not that: a writer that
    is silent while nothing happens (vLLM's stats line) leaves gaps of idle time, not of blindness."""

    seconds: float
    how: str  # the writer's rule, for the report: "vLLM's stats line, every 10 s while serving, ..."


@dataclass
class Imported:
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)  # ts is epoch seconds (UTC)
    warnings: list[str] = field(default_factory=list)
    environment: dict[str, str] = field(default_factory=dict)  # driver, CUDA, ... for the manifest
    cadences: dict[str, Cadence] = field(default_factory=dict)  # by table, where its writer's is known

    @property
    def rows(self) -> int:
        return sum(len(frame) for frame in self.tables.values())


# A file larger than this is never held whole: its lines are read in pieces of PIECE_BYTES, each
# mended on its own (a log of days runs to gigabytes; held as text, then mended, then split into
# lines, it would take four times its size). A gzip file counts at a quarter of it: it inflates.
STREAM_BYTES = 32 * 2**20
PIECE_BYTES = 8 * 2**20


class Source:
    """A file offered to the importers: its lines as its format wrote them, and its modification time.

    ``mended`` says what :func:`~diagnose.importers.mend.mend` undid to get them (a prefix on every
    line, a hard wrap, ...), for the report; ``prefixes``, who wrote the lines, from the prefixes
    taken off them. An importer reads :meth:`lines` (a file of any size, in bounded memory) or, for a
    format that is one document (a JSON file, a memory summary, a profiler table), :attr:`text`.
    """

    def __init__(
        self,
        name: str,
        text: str,
        mtime: float,
        mended: tuple[str, ...] = (),
        prefixes: tuple[str, ...] = (),
        commands: tuple[str, ...] = (),
    ) -> None:
        self.name = name
        self.mtime = mtime  # the only clock a line without a wall-clock stamp has
        self._text = text
        self._mended = dict.fromkeys(mended)
        self._prefixes = dict.fromkeys(prefixes)
        self._commands = dict.fromkeys(commands)
        self._watcher: Callable[[str], None] | None = None

    @property
    def text(self) -> str:
        return self._text

    def lines(self) -> Iterator[str]:
        """The lines, read afresh at each call: an importer may pass over them twice."""
        return iter(self._text.splitlines())

    def watch(self, reader: Callable[[str], None]) -> None:
        """Give ``reader`` the text in consecutive blocks of whole lines, each once, as the importer
        reads them (a second pass over a large file would mend it all again); :meth:`finish_watch`
        gives it what the importer did not read. A file held whole is one block."""
        self._watcher = reader

    def finish_watch(self) -> None:
        if self._watcher is not None:
            self._watcher(self._text)
            self._watcher = None

    @property
    def mended(self) -> tuple[str, ...]:
        return tuple(self._mended)

    @property
    def ends_open(self) -> bool:
        """The last line has no line end: a writer ends its last line, a paste cut short does not,
        so the last line's last field may be cut (``98.5`` read as ``98``)."""
        return bool(self._text) and not self._text.endswith("\n")

    @property
    def prefixes(self) -> tuple[str, ...]:
        return tuple(self._prefixes)

    @property
    def commands(self) -> tuple[str, ...]:
        """The commands of the shell prompt lines mending took off ("vmstat 2"): a tool's options
        (its interval, its unit) where its output does not say them."""
        return tuple(self._commands)

    @classmethod
    def from_path(cls, path: Path) -> Source:
        with open_maybe_gzipped(path) as handle:
            if isinstance(handle, gzip.GzipFile):
                streamed = os.stat(path).st_size > STREAM_BYTES // 4
            else:
                streamed = os.stat(path).st_size > STREAM_BYTES
            if streamed:
                return StreamedSource(path)
            text = handle.read().decode("utf-8", errors="replace")
        mended = mend(text)
        return cls(
            path.name, mended.text, os.stat(path).st_mtime, mended.undone, mended.prefixes, mended.commands
        )


class StreamedSource(Source):
    """A large file, read from disk in pieces each time its lines are asked for. Each piece is mended
    on its own: what pasting or shipping did to a file (a prefix, a wrap width) is the same throughout
    it, and a piece holds thousands of lines to judge it by. What was undone is known for the first
    piece at once and for the rest as they are read. Its :attr:`text` is made whole only when an
    importer of a one-document format asks for it."""

    def __init__(self, path: Path) -> None:
        super().__init__(path.name, "", os.stat(path).st_mtime)
        self._path = path
        self._undone: dict[object, str] = {}  # what was undone, by kind: its counts summed over the pieces
        self._counted = 0  # the pieces counted so far (the lines are read again by each pass over them)
        self._watched = 0  # the pieces given to the watcher so far
        self._ends_open = False
        # what the first piece needed: every piece gets the same
        self._dedent: bool = True
        self._steps: frozenset[str] | None = None
        for _ in self._mended_pieces(first_only=True):
            pass

    @property
    def mended(self) -> tuple[str, ...]:
        return tuple(self._undone.values())

    @property
    def text(self) -> str:
        return "\n".join(self.lines())

    @property
    def ends_open(self) -> bool:
        return self._ends_open

    def lines(self) -> Iterator[str]:
        for piece in self._mended_pieces():
            yield from piece.splitlines()

    def watch(self, reader: Callable[[str], None]) -> None:
        self._watcher, self._watched = reader, 0

    def finish_watch(self) -> None:
        if self._watcher is not None:
            for _ in self._mended_pieces(start=self._watched):
                pass
            self._watcher = None

    def _mended_pieces(self, first_only: bool = False, start: int = 0) -> Iterator[str]:
        # Later pieces are put through what the first needed (most steps cost more than the importer's
        # reading): only a file's last line can be cut, and its common indent is its format's unless the
        # first piece's was taken off. Pieces before ``start`` are not mended (the first one's needs are
        # known from the first read).
        with open_maybe_gzipped(self._path) as handle:
            for number, raw in enumerate(_pieces(handle, PIECE_BYTES)):
                if number < start:
                    continue
                mended = mend(raw.decode("utf-8", errors="replace"), self._dedent, self._steps)
                self._ends_open = not raw.endswith(b"\n")
                if self._steps is None:
                    self._steps = frozenset({*mended.steps, "cut_end"})
                    self._dedent = any(s.startswith("removed a common indentation") for s in mended.undone)
                if number == self._counted:
                    self._counted += 1
                    self._count(mended)
                if self._watcher is not None and number == self._watched:
                    self._watched += 1
                    self._watcher(mended.text)
                yield mended.text
                if first_only:
                    return

    def _count(self, mended: Mended) -> None:
        self._prefixes.update(dict.fromkeys(mended.prefixes))
        self._commands.update(dict.fromkeys(mended.commands))
        for said in mended.undone:
            kind = said.kind if isinstance(said, Undone) else said
            kept = self._undone.get(kind)
            if isinstance(kept, Undone) and isinstance(said, Undone):
                said = kept.plus(said)
            self._undone[kind] = said


def _pieces(handle: IO[bytes] | gzip.GzipFile, size: int) -> Iterator[bytes]:
    """The file's bytes in pieces of about ``size``, each ending at a line's end (the last piece at
    the file's): no line is cut, and a UTF-8 character never spans two pieces."""
    rest = b""
    while block := handle.read(size):
        block = rest + block
        end = block.rfind(b"\n")
        if end < 0:
            rest = block
            continue
        rest = block[end + 1 :]
        yield block[: end + 1]
    if rest:
        yield rest


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


class Strength(IntEnum):
    """What an importer found in a file's head that makes the file its own, weakest first."""

    SHAPE = 1  # lines shaped like its format, which other writers write too: bare table rows, CSV, samples
    STATEMENT = 2  # lines only its writer writes, among others: an engine's stats line, a kernel's Xid
    DOCUMENT = 3  # the format's own title or header, which names it: ==NVSMI LOG==, a profiler's header row


@dataclass(frozen=True, order=True)
class Claim:
    """An importer's claim on a file: how sure it is, then how many of the head's lines are its own.

    The strongest claim reads the file, whatever the order the importers are listed in; between two
    of one strength, the one that accounts for more lines (an engine's log with one CUDA OOM in it is
    the engine's reader's, which reads the OOM too; a traceback that ends in an OOM is the OOM's)."""

    strength: Strength
    lines: int


def claim(strength: Strength, lines: int) -> Claim | None:
    """A claim of ``lines`` lines, or none when no line is the importer's."""
    return Claim(strength, lines) if lines > 0 else None


class Importer(ABC):
    """A reader of one format: it claims a file of its format, by the file's content, and reads it
    into dump tables. A subclass that leaves either out cannot be made.

    Its :attr:`example` is a short file of the format as its writer writes it, kept in ``examples/``:
    ``diagnose formats NAME`` shows it, and a test offers it to every importer (its own must make the
    strongest claim on it, alone, and read rows from it).
    """

    name: str = ""
    description: str = ""

    @property
    def example(self) -> str:
        """A short file of the format, verbatim (diagnose/importers/examples/NAME.txt)."""
        return (EXAMPLES / f"{self.name}.txt").read_text(encoding="utf-8")

    @abstractmethod
    def recognise(self, head: str) -> Claim | None:
        """The importer's claim on the file whose start is ``head`` (mended like the text :meth:`read`
        gets), or None where the file is not of its format."""

    @abstractmethod
    def read(self, source: Source, tz: str | None = None) -> Imported:
        """``tz``: the zone of times written without an offset (``--tz``); UTC when None."""


class FileImporter(Importer):
    """An importer of files too large to hold as text (a profiler trace runs to hundreds of MB): it
    streams the file itself. What pasting does to text does not happen to such files, so nothing is
    mended; :meth:`read` (a pasted excerpt) still works, on the text."""

    binary = False  # a format that is not text (an SQLite export): its example says how one is made

    def recognise_file(self, path: Path) -> bool:
        """For a binary file (no text head to recognise): whether this importer reads it."""
        return False

    @abstractmethod
    def read_file(self, path: Path, tz: str | None = None) -> Imported:
        """The file read as it streams from disk."""


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


def filled(lines: Iterable[str]) -> int:
    """How many of ``lines`` hold something: what a claim counts of a format that owns what follows its
    header."""
    return sum(1 for line in lines if line.strip())


def header_claim(head: str, is_header: Callable[[str], object]) -> Claim | None:
    """The claim of a format that owns the lines from its header on: none where no line is its header."""
    lines = head.splitlines()
    at = next((index for index, line in enumerate(lines) if is_header(line)), None)
    return None if at is None else claim(Strength.DOCUMENT, filled(lines[at:]))


def data_lines(lines: Iterable[str]) -> Iterator[str]:
    """Lines without the blank ones and without ``#`` comments (the corpus's source lines among them)."""
    return (line for line in lines if line.strip() and not line.lstrip().startswith("# source:"))
