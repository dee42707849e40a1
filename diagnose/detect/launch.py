"""Starting the spike helper's process (detect/helper.py), with nothing but the standard library.

``diagnose file`` starts the helper before it imports numpy and pandas: the
helper's own imports (half a second of a core) then overlap this process's,
instead of competing with the dump's read, which keeps both cores busy. On a
day-long dump that read took 0.27 s alone and 0.4-1.1 s beside an importing
helper.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from diagnose.processes import beside

# Before the dump is read: table files this big may hold enough rows for the helper to pay for itself
# (Parquet packs a 1 Hz row in 10-30 bytes); it is closed once the dump proves smaller.
MIN_TABLE_BYTES = 4 * 2**20
_MODULE = "diagnose.detect.helper"


def may_help_files(path: str | Path) -> bool:
    """Before the dump is read: are its files big enough that a helper may pay for itself?"""
    return Path(path).is_dir() and beside.files_bytes(path) >= MIN_TABLE_BYTES


def start_process() -> subprocess.Popen | None:
    """The helper's process, reading signals on its stdin; None where a second one cannot help or start."""
    return beside.start_module(_MODULE, talk=True) if beside.second_core() else None


def start_for_files(path: str | Path) -> subprocess.Popen | None:
    """A helper's process for the dump at ``path`` if its files are big enough, else None."""
    return start_process() if may_help_files(path) else None
