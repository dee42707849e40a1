"""ruptures' ``KernelCPD`` with the linear kernel (the l2 cost, in C): the one search both detectors use.

``import ruptures`` takes about a second, most of it ``scipy.stats``, which
the package's ``__init__`` pulls in through ``costs.costrank`` for a rank
cost diagnose never uses. On a day-long dump that one import was a fifth of
the whole analysis, five times what the searches themselves cost. So the
search calls ruptures' compiled penalised l2 search (``ekcpd_pelt_L2``, what
``KernelCPD(kernel="linear").predict(pen=...)`` calls) loaded straight from
the installed package, without executing the package's ``__init__``; that
takes under a millisecond. Where that module is not where ruptures 1.1 keeps
it, or does not load, the search falls back to the public ``KernelCPD``:
slower to start, same answer (``tests/test_segment.py`` checks both agree).
"""

from __future__ import annotations

import functools
import importlib.machinery
import importlib.util
from collections.abc import Callable
from pathlib import Path

import numpy as np

_KERNEL_MODULE = "ruptures.detection._detection.ekcpd"

Search = Callable[[np.ndarray, int, float], list[int]]


def breakpoints(signal: np.ndarray, min_size: int, penalty: float) -> list[int]:
    """Segment ends (the last is ``signal.size``) of the penalised l2 segmentation."""
    if signal.size < 2 * min_size:
        return [int(signal.size)]  # no room for two segments (KernelCPD would raise)
    return _search()(signal, min_size, penalty)


@functools.cache
def _search() -> Search:
    kernel = _compiled_kernel()
    return _public_search if kernel is None else functools.partial(_kernel_search, kernel)


def _kernel_search(kernel: Callable, signal: np.ndarray, min_size: int, penalty: float) -> list[int]:
    # What KernelCPD.predict(pen=) does after its checks: follow the path of segment starts back.
    column = signal.astype(np.double).reshape(-1, 1)  # a fresh, writable copy, as KernelCPD.fit makes
    path = kernel(column, float(penalty), int(min_size))
    ends = []
    end = column.shape[0]
    while end > 0:
        ends.append(end)
        end = int(path[end])
    return ends[::-1]


def _public_search(signal: np.ndarray, min_size: int, penalty: float) -> list[int]:
    import ruptures  # the documented way; see the module docstring for why it is the fallback

    found = ruptures.KernelCPD(kernel="linear", min_size=min_size).fit(signal).predict(pen=penalty)
    return [int(b) for b in found]


def _compiled_kernel() -> Callable | None:
    """ruptures' ``ekcpd_pelt_L2``, or None where this ruptures keeps it elsewhere."""
    package = importlib.util.find_spec("ruptures")
    if package is None or not package.submodule_search_locations:
        return None
    folder = Path(next(iter(package.submodule_search_locations))) / "detection" / "_detection"
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = folder / f"ekcpd{suffix}"
        if not path.is_file():
            continue
        loader = importlib.machinery.ExtensionFileLoader(_KERNEL_MODULE, str(path))
        spec = importlib.util.spec_from_file_location(_KERNEL_MODULE, path, loader=loader)
        if spec is None:
            continue
        try:
            module = importlib.util.module_from_spec(spec)
            loader.exec_module(module)
        except ImportError:
            return None
        return getattr(module, "ekcpd_pelt_L2", None)
    return None
