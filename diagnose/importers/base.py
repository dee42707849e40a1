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

    @property
    def rows(self) -> int:
        return sum(len(frame) for frame in self.tables.values())


class Importer:
    name: str = ""
    description: str = ""
    example: str = ""

    def recognise(self, head: str) -> bool:
        raise NotImplementedError

    def read(self, path: Path) -> Imported:
        raise NotImplementedError


def file_time(path: Path) -> float:
    """The file's modification time: the only clock a log line without a wall-clock stamp has."""
    return os.stat(path).st_mtime


def read_text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def data_lines(text: str) -> list[str]:
    """Lines without the blank ones and without ``#`` comments (the corpus's source lines among them)."""
    return [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("# source:")]
