"""A worker pool's processes end when the process that made them is killed outright.

concurrent.futures' own workers outlive a parent killed with SIGKILL (each holds the writing end of the
queue it waits on): diagnose serve, killed by the OOM killer, left its workers waiting for ever.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from tests.helpers.service import wait_for

_PARENT = """
import os, sys, time
from diagnose.processes.pool import worker_pool

pool = worker_pool(2, sys.argv[1])
pids = {pool.submit(os.getpid).result() for _ in range(8)}
pool.submit(time.sleep, 600)  # one worker busy, as a diagnosis in progress
print(" ".join(map(str, sorted(pids))), flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie is gone, only not yet reaped
        return stat.read().rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("start_method", ["spawn", "fork"])
def test_workers_end_when_their_parent_is_killed_with_sigkill(start_method):
    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT, start_method], stdout=subprocess.PIPE, text=True
    )
    workers: list[int] = []
    try:
        workers = [int(pid) for pid in parent.stdout.readline().split()]
        assert workers and all(_alive(pid) for pid in workers)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        wait_for(lambda: not any(_alive(pid) for pid in workers), timeout=30)
    finally:
        parent.kill()
        for pid in filter(_alive, workers):  # what a failure would leave behind
            os.kill(pid, signal.SIGKILL)
