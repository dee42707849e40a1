"""Run a command that the kernel stops when the runner dies: ``python -m testbed.guard PARENT_PID CMD...``.

The request is made here, after exec, not in a ``preexec_fn`` (which may
deadlock a process that has threads), and is inherited by the command this
replaces itself with. On Linux only; elsewhere the command runs unguarded and
the runner's own clean-up is all there is.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1


def main(argv: list[str]) -> None:
    parent, command = int(argv[0]), argv[1:]
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # the runner died before the request was made
        sys.exit(1)
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
