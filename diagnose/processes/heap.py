"""Keep freed memory for the next array instead of handing it back to the OS at once.

The analysis makes and drops hundreds of arrays of a few megabytes (a
million requests, a day at 1 Hz). glibc's malloc serves blocks that big from
fresh mappings, or trims them from the heap's top as soon as they are freed,
so each new array faults its pages in again: on a day-long dump that was a
fifth of the analysis' time, spent in the kernel. Raising the mapping and
trim thresholds (``mallopt``, as ``MALLOC_MMAP_THRESHOLD_`` and
``MALLOC_TRIM_THRESHOLD_`` would) lets freed blocks be reused; the peak
memory is unchanged, since a block is only kept while it is not in use by
another. Elsewhere than glibc this does nothing.

At exit the interpreter collects garbage once more over every object still
alive, pandas' and pyarrow's modules and the analysis' results among them: 50
ms of a day-long dump's ``diagnose file``, after the report is written.
:func:`leave_the_rest_to_exit` freezes them first (``gc.freeze``), so that
collection skips them; the OS takes the process's memory back either way.
"""

from __future__ import annotations

import ctypes
import functools
import gc
import sys

_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD = 32 * 2**20  # glibc's largest on 64-bit systems: blocks above it are still mapped
_TRIM_THRESHOLD = 512 * 2**20
_TOP_PAD = 64 * 2**20


@functools.cache
def reuse_freed_memory() -> bool:
    """Tune this process's malloc for many short-lived big arrays; True where it took effect."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        # The process's own symbols, libc's among them: no library search (ctypes.util.find_library
        # runs ldconfig, 30 ms on every command).
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return all(
        mallopt(option, value) == 1
        for option, value in (
            (_M_MMAP_THRESHOLD, _MMAP_THRESHOLD),
            (_M_TRIM_THRESHOLD, _TRIM_THRESHOLD),
            (_M_TOP_PAD, _TOP_PAD),
        )
    )


def leave_the_rest_to_exit() -> None:
    """For a process's last step: nothing still alive is examined again by the garbage collector.

    Only where the process ends next: frozen objects are never collected (tests calling the CLI's
    ``main`` in one process must not).
    """
    gc.freeze()
