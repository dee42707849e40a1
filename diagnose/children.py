"""What the processes diagnose starts for itself share: the CPUs to count on, and their environment.

The spike helper (detect/launch.py) and compare's second side
(compare/parallel.py) are both fresh ``python -m diagnose...`` processes
working beside this one. Standard library only: both are started before numpy
and pandas are imported.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from diagnose.process_env import worker_environment


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def child_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` with this copy of diagnose first on the path (the child runs the same code) and
    diagnose's settings (process_env.py: it works beside this process)."""
    root = str(Path(__file__).resolve().parents[1])
    paths = [root, *filter(None, environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**worker_environment(environ), "PYTHONPATH": os.pathsep.join(paths)}
