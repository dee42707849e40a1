"""What recording costs the host: the recorder's CPU time per sample.

    python benchmarks/bench_record.py [--seconds 30] [--processes 300] [--ring]

Starts ``--processes`` idle processes (so the process table looks like a busy
host's), runs ``diagnose record`` for ``--seconds`` at 1 s, and reads the
recorder's CPU time from the OS: for the whole process (getrusage of the
child, start-up and imports included) and for the sampling loop alone (the
manifest's ``recorder_cpu_s``, from ``time.process_time``), with its first
sample apart (``recorder_first_sample_cpu_s``: it opens every file it keeps
reading, a cost paid once) and each later one. Where
``nvidia-smi`` exists, the cost of calling ``nvidia-smi --query-gpu`` once a
second for the same time is measured the same way, for comparison. With
``--ring`` the recorder runs as the flight recorder (``--ring 30m`` and a P99
trigger), whose ring and trigger checks must fit the same budget. With
``--threads N`` (default 200) a process of N threads, waking ten times a
second as a server's pools do, is watched (``--pid``): each of its threads is
read every second (the busiest thread, its context switches, whether it is
runnable), the recorder's dearest reading.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.quick import add_quick  # noqa: E402

# A server's worth of threads, each waking ten times a second for a moment, until told to stop.
_SERVER = """
import sys, threading, time
def wake():
    while True:
        time.sleep(0.1)
for _ in range(int(sys.argv[1])):
    threading.Thread(target=wake, daemon=True).start()
time.sleep(float(sys.argv[2]))
"""


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=int, default=30)
    parser.add_argument("--processes", type=int, default=300)
    parser.add_argument("--ring", action="store_true", help="measure the flight recorder instead")
    parser.add_argument("--threads", type=int, default=200, help="threads of the watched server process")
    add_quick(parser)
    args = parser.parse_args()
    if args.quick:
        args.seconds, args.processes, args.threads = 3, 10, 8
    ring = ["--ring", "30m", "--trigger", "p99_ms > 500 for 10s"] if args.ring else []
    idle = [subprocess.Popen(["sleep", str(args.seconds + 60)]) for _ in range(args.processes)]
    server = subprocess.Popen([sys.executable, "-c", _SERVER, str(args.threads), str(args.seconds + 60)])
    idle.append(server)
    try:
        with tempfile.TemporaryDirectory() as scratch:
            folder = Path(scratch) / "dump"
            before = _children_cpu()
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "diagnose",
                    "record",
                    "-o",
                    str(folder),
                    "--duration",
                    f"{args.seconds}s",
                    "--pid",
                    str(server.pid),
                    *ring,
                ],
                check=True,
                capture_output=True,
            )
            whole = _children_cpu() - before
            last = sorted((folder / ".ring").glob("segment-*"))[-1] if args.ring else folder
            manifest = yaml.safe_load((last / "manifest.yaml").read_text())
    finally:
        for process in idle:
            process.kill()
            process.wait()
    samples, loop = manifest["samples"], manifest["recorder_cpu_s"]
    first = manifest.get("recorder_first_sample_cpu_s", 0.0)
    mode = "flight recorder (--ring 30m, one trigger)" if args.ring else "one dump"
    print(
        f"host: {args.processes} extra idle processes, a watched one of {args.threads} threads; "
        f"{mode}: {samples} samples in {args.seconds} s"
    )
    print(
        f"diagnose record, whole process: {whole:.2f} CPU s = {whole / args.seconds * 100:.2f} % of a core "
        f"(start-up and imports included)"
    )
    print(
        f"diagnose record, sampling loop: {loop:.3f} CPU s = {loop / samples * 1000:.1f} ms a sample "
        f"= {loop / args.seconds * 100:.2f} % of a core"
    )
    if samples > 1:
        later = (loop - first) / (samples - 1)
        print(
            f"  the first sample {first * 1000:.1f} ms (it opens every file it keeps reading), "
            f"each later one {later * 1000:.2f} ms = {later * 100 / 1.0:.2f} % of a core at 1 s"
        )
    nvidia_smi = shutil.which("nvidia-smi")
    if nvidia_smi is None:
        print("nvidia-smi: not found on this machine; no comparison")
        return
    before = _children_cpu()
    for _ in range(args.seconds):
        started = time.monotonic()
        subprocess.run(
            [
                nvidia_smi,
                "--query-gpu=utilization.gpu,memory.used,memory.total,clocks.sm,power.draw,temperature.gpu",
                "--format=csv",
            ],
            capture_output=True,
            check=False,
        )
        time.sleep(max(0.0, 1.0 - (time.monotonic() - started)))
    spent = _children_cpu() - before
    print(
        f"nvidia-smi --query-gpu once a second: {spent:.2f} CPU s = "
        f"{spent / args.seconds * 100:.2f} % of a core"
    )


if __name__ == "__main__":
    main()
