"""The before side of a big comparison, measured in a second process while this one measures the after side.

Each side's reading and analysis is mostly one core's work, so two day-long
dumps take nearly twice as long one after the other as side by side. The
second process is a fresh ``python -m diagnose.compare.side_process`` that
measures one dump and writes its evidence as JSON: plain data, nothing that
runs code when read back. A second process that fails or dies costs only
time: the side is then measured here, where its errors are reported as usual.

This module imports the standard library alone, so that the CLI starts the
second process before it imports numpy and pandas itself: the two processes'
imports then overlap, and the second side is ready as soon as the first.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from diagnose.processes import beside

if TYPE_CHECKING:
    from diagnose.compare.evidence import Evidence

# Below this many bytes on disk a dump is measured in a second or two, less than a second process's start.
MIN_BYTES = 16 * 2**20


def worth_it(path: str) -> bool:
    return beside.second_core() and beside.files_bytes(path, nested=True) >= MIN_BYTES


def start_if_worth_it(path: str, rules_dir: Path | None, tz: str | None) -> Elsewhere | None:
    """The before side's process for the dump at ``path`` if it is big enough, else None."""
    return Elsewhere(path, rules_dir, tz) if worth_it(path) else None


class Elsewhere:
    """A side being measured by a second process; :meth:`result` waits for it (None if it failed)."""

    def __init__(self, path: str, rules_dir: Path | None, tz: str | None) -> None:
        self._folder = tempfile.TemporaryDirectory(prefix="diagnose-compare-")
        self._out = Path(self._folder.name) / "evidence.json"
        args = [path, str(self._out)]
        args += ["--rules", str(rules_dir)] if rules_dir else []
        args += ["--tz", tz] if tz else []
        self._process = beside.start_module("diagnose.compare.side_process", args)

    def result(self) -> Evidence | None:
        from diagnose.compare.side_process import from_json

        try:
            if self._process is None or self._process.wait() != 0 or not self._out.exists():
                return None
            return from_json(json.loads(self._out.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError):
            return None
        finally:
            self._folder.cleanup()

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        self._folder.cleanup()
