"""Follow a growing text file like ``tail -F``: new complete lines only, across rotations.

A partial last line (the writer is mid-line) is held back until its newline
arrives. Rotation — the path now names another file (new inode), or the file
shrank (truncated in place) — restarts reading from the new file's start.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO


class FileFollower:
    def __init__(self, path: str | Path, from_start: bool = False) -> None:
        self.path = Path(path)
        self._handle: BinaryIO | None = None
        self._problem: str | None = None  # why the last open failed
        self._inode: int | None = None
        self._partial = b""
        self._open(seek_end=not from_start)

    def _open(self, seek_end: bool) -> None:
        try:
            handle = open(self.path, "rb")  # noqa: SIM115 - kept open between reads, closed in close()
        except OSError as error:
            self._handle, self._problem = None, (error.strerror or str(error)).lower()
            return
        self._handle, self._problem = handle, None
        self._inode = os.fstat(handle.fileno()).st_ino
        self._partial = b""
        if seek_end:
            handle.seek(0, os.SEEK_END)

    def read_lines(self) -> list[str]:
        if self._handle is None:
            self._open(seek_end=False)  # the file did not exist yet: read it whole once it does
            if self._handle is None:
                return []
        lines = self._drain(self._handle)
        if self._rotated(self._handle):
            self._handle.close()
            self._open(seek_end=False)
            if self._handle is not None:
                lines += self._drain(self._handle)
        return lines

    def _drain(self, handle: BinaryIO) -> list[str]:
        data = self._partial + handle.read()
        *complete, self._partial = data.split(b"\n")
        return [line.decode("utf-8", errors="replace").rstrip("\r") for line in complete if line.strip()]

    def _rotated(self, handle: BinaryIO) -> bool:
        try:
            status = os.stat(self.path)
        except OSError:
            return False
        return status.st_ino != self._inode or status.st_size < handle.tell()

    def problem(self) -> str | None:
        """Why the file is not being read (no such file, no permission), or None while it is.

        The answer of the last attempt to open it (at start and at each read while it is
        missing): asking opens nothing.
        """
        return None if self._handle is not None else self._problem

    def header(self) -> str | None:
        """The file's first line (a CSV header), whatever has been read so far."""
        try:
            with open(self.path, encoding="utf-8", errors="replace") as handle:
                return handle.readline().rstrip("\r\n") or None
        except OSError:
            return None

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
