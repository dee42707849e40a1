"""What every importer is: it recognises a file by its content and turns it into dump tables."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

HEAD_BYTES = 65_536


@dataclass
class Imported:
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)  # ts is epoch seconds (UTC)
    warnings: list[str] = field(default_factory=list)
    environment: dict[str, str] = field(default_factory=dict)  # driver, CUDA, ... for the manifest

    @property
    def rows(self) -> int:
        return sum(len(frame) for frame in self.tables.values())


class Importer:
    name: str = ""
    description: str = ""
    example: str = ""

    def recognise(self, head: str) -> bool:
        raise NotImplementedError

    def read(self, path: Path, tz: str | None = None) -> Imported:
        """``tz``: the zone of times written without an offset (``--tz``); UTC when None."""
        raise NotImplementedError


def local_epoch(stamp: pd.Timestamp, tz: str | None) -> float:
    """A time written without an offset, in zone ``tz`` (UTC when None), as epoch seconds."""
    if stamp.tzinfo is not None:
        return stamp.timestamp()
    return stamp.tz_localize(tz or "UTC").timestamp()


def local_epochs(stamps: pd.Series, tz: str | None) -> pd.Series:
    """Like :func:`local_epoch` for a column of naive datetimes (NaT stays missing)."""
    localized = stamps.dt.tz_localize(tz or "UTC", ambiguous="NaT", nonexistent="NaT")
    return (localized - pd.Timestamp(0, tz="UTC")).dt.total_seconds()


def zone_note(what: str, tz: str | None) -> str:
    if tz:
        return f"{what} have no UTC offset: read in {tz} (--tz)"
    return f"{what} have no UTC offset: read as UTC (give their zone with --tz)"


def file_time(path: Path) -> float:
    """The file's modification time: the only clock a log line without a wall-clock stamp has."""
    return os.stat(path).st_mtime


def read_text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def data_lines(text: str) -> list[str]:
    """Lines without the blank ones and without ``#`` comments (the corpus's source lines among them)."""
    return [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("# source:")]
