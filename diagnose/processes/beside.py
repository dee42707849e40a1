"""A second diagnose process working beside this one: the spike helper (detect/launch.py), compare's
other side (compare/parallel.py).

One is started only where it can pay for itself: a second core to run on, and files big enough that
the work outlasts a Python process's start. It runs ``python -m MODULE`` on this copy of diagnose,
with diagnose's environment (environment.py). Standard library only: the CLI starts it before numpy
and pandas are imported, so that the two processes' imports overlap.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from diagnose.processes.environment import child_environment, usable_cpus


def files_bytes(path: str | Path, nested: bool = False) -> int:
    """The size on disk of a file, or of the files in a folder (``nested``: in its folders too)."""
    target = Path(path)
    try:
        if target.is_file():
            return target.stat().st_size
        if not target.is_dir():
            return 0
        files = target.rglob("*") if nested else target.iterdir()
        return sum(f.stat().st_size for f in files if f.is_file())
    except OSError:
        return 0


def second_core() -> bool:
    return usable_cpus() >= 2


def start_module(module: str, args: Sequence[str] = (), talk: bool = False) -> subprocess.Popen | None:
    """``python -m module args`` beside this process; ``talk``: its stdin and stdout are pipes to this
    one (else its output is dropped). None where it could not start."""
    pipe = subprocess.PIPE if talk else subprocess.DEVNULL
    try:
        return subprocess.Popen(
            [sys.executable, "-m", module, *args],
            stdin=subprocess.PIPE if talk else None,
            stdout=pipe,
            stderr=subprocess.DEVNULL,
            env=child_environment(os.environ),
        )
    except OSError:
        return None
