"""The environment diagnose's processes run with: one BLAS thread and no huge pages, set before numpy
and pyarrow load; and for the processes it starts for itself, the same copy of diagnose first on the
path and the CPUs to count on.

One BLAS thread per process: ``diagnose file`` runs its spike search in a
second process and ``diagnose compare`` measures its two sides in two, so each
core already has a process of its own. OpenBLAS (numpy's and scipy's) starts a
thread per core besides, for the bootstrap's matrix products and the fits, and
its threads spin while they wait for the next product: on a day-long dump that
was 0.8 s of a core per process, taken from the other process.

No transparent huge pages: numpy asks for them for every array of 4 MiB or
more, and pyarrow's default allocator (mimalloc) takes them for its segments;
each first touch of one then zeroes 2 MiB in the kernel. The analysis makes
hundreds of short-lived arrays, whose pages gain little from fewer TLB misses.
On the system allocator, the buffers pyarrow frees once a table is converted
go back to the heap that numpy's arrays are then cut from (heap.py), instead
of new pages. Measured on a day-long dump on a 2-core VM, runs interleaved:
``diagnose file`` 1.92 s median over ten runs without them, 2.03 s with (the
best runs alike); ``diagnose compare`` of two such dumps 3.2 s median over
eight without numpy's, 3.9 s with, and 4.0 s against 4.3 over five without
pyarrow's besides; the difference was time in the kernel, the peak memory the
same.

A user's own setting of any of these wins. They must be set before numpy and
pyarrow are first imported, which the CLI does.

The spike helper (detect/launch.py) and compare's second side
(compare/parallel.py) are both fresh ``python -m diagnose...`` processes
working beside this one, started before numpy and pandas are imported: this
module is standard library only.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

_DEFAULTS = {
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "NUMPY_MADVISE_HUGEPAGE": "0",
    "ARROW_DEFAULT_MEMORY_POOL": "system",
}


def worker_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` with diagnose's settings where it sets none of its own (for a child process)."""
    return {**_DEFAULTS, **environ}


def use_worker_environment() -> None:
    """This process (if numpy and pyarrow are not loaded yet) and the processes it starts."""
    os.environ.update(worker_environment(os.environ))


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def child_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` with this copy of diagnose first on the path (the child runs the same code) and
    diagnose's settings (it works beside this process)."""
    root = str(Path(__file__).resolve().parents[2])
    paths = [root, *filter(None, environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**worker_environment(environ), "PYTHONPATH": os.pathsep.join(paths)}
