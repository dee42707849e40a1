"""One BLAS thread per process: diagnose spreads its work over processes, not BLAS threads.

``diagnose file`` runs its spike search in a second process and ``diagnose
compare`` measures its two sides in two, so each core already has a process
of its own. OpenBLAS (numpy's and scipy's) starts a thread per core besides,
for the bootstrap's matrix products and the fits, and its threads spin while
they wait for the next product: on a day-long dump that was 0.8 s of a core
per process, taken from the other process. A user's own setting wins; this
must run before numpy is first imported, which the CLI does.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

_VARIABLES = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def one_thread_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` with one BLAS thread where it sets no number of its own (for a child process)."""
    return {**dict.fromkeys(_VARIABLES, "1"), **environ}


def use_one_thread() -> None:
    """This process (if numpy is not loaded yet) and the processes it starts: one BLAS thread each."""
    os.environ.update(one_thread_environment(os.environ))
