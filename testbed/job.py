"""The co-located job: a batch process that takes CPU cores and memory for a while, then exits.

    python -m testbed.job --seconds 14.2 --memory-mb 512 --threads 2

Started by the runner on a jittered period, as cron starts a script: a new
process each time, named ``python`` like the server, with its own arguments.
The work is numpy matrix products on ``--threads`` threads (numpy releases the
interpreter lock, so each thread takes a core) over ``--memory-mb`` of touched
memory.
"""

from __future__ import annotations

import argparse
import threading
import time

import numpy as np


def _burn(until: float, size: int) -> None:
    rng = np.random.default_rng()
    a = rng.standard_normal((size, size))
    while time.monotonic() < until:
        a = np.tanh(a @ a)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m testbed.job", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--memory-mb", type=int, default=512)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    held = np.ones(args.memory_mb * 2**20 // 8)  # touched: resident, not merely reserved
    until = time.monotonic() + args.seconds
    workers = [threading.Thread(target=_burn, args=(until, 256)) for _ in range(args.threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    del held


if __name__ == "__main__":
    main()
