"""ruptures' ``KernelCPD`` with the linear kernel (the l2 cost, in C): the one search both detectors use.

Importing ruptures takes most of a second, most of it scipy.stats, which ruptures
loads for cost functions diagnose never uses. So it is imported on first use:
commands that never segment anything (``--help``, an error, a recording) do not
pay for it. (Importing it on a thread while the dump is read was tried: the
import holds the interpreter lock and saved nothing measurable.)
"""

from __future__ import annotations

import numpy as np


def breakpoints(signal: np.ndarray, min_size: int, penalty: float) -> list[int]:
    """Segment ends (the last is ``signal.size``) of the penalised l2 segmentation."""
    import ruptures  # deferred: see the module docstring

    return ruptures.KernelCPD(kernel="linear", min_size=min_size).fit(signal).predict(pen=penalty)
