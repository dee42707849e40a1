"""How much memory and time `diagnose file` takes on a large engine log, against the log's size.

    python benchmarks/bench_import.py                 # a 512 MiB vLLM log, plain and gzip
    python benchmarks/bench_import.py --size-mib 2048
    python benchmarks/bench_import.py --quick         # 40 MiB: checks that it runs (CI)

Writes a vLLM log in a temporary folder (a stats line every 50 lines among request lines, every line
with the process tag a Ray or multiprocessing launch puts on it, so that mending has work on every
line), then runs `python -m diagnose file LOG --format json` in a fresh process and prints the wall
time, the peak RSS of the process, and the log's size. A file over 32 MiB is read in pieces of 8 MiB
(diagnose/importers/base.py): the peak should stay near the interpreter, pandas and a few pieces,
whatever the size, where a whole read would hold the text several times over.
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.quick import add_quick  # noqa: E402

_ROOT = Path(__file__).resolve().parents[1]
_MIB = 2**20


def write_log(path: Path, size_mib: float) -> int:
    """A vLLM log of about ``size_mib``; returns its stats lines."""
    stats = 0
    with open(path, "w", encoding="utf-8") as out:
        i = 0
        while out.tell() < size_mib * _MIB:
            block = []
            for _ in range(1000):
                stamp = (
                    f"05-{19 + i // 864000:02d} {i // 36000 % 24:02d}:{i // 600 % 60:02d}:{i // 10 % 60:02d}"
                )
                if i % 50 == 0:
                    stats += 1
                    block.append(
                        f"(VllmWorkerProcess pid=7) INFO {stamp} [loggers.py:271] Engine 000: Avg prompt "
                        f"throughput: {i % 97}.0 tokens/s, Avg generation throughput: {i % 89}.5 tokens/s, "
                        f"Running: {i % 13} reqs, Waiting: {i % 5} reqs, GPU KV cache usage: {i % 100}.0%"
                    )
                else:
                    block.append(
                        f"(VllmWorkerProcess pid=7) INFO {stamp} [logger.py:43] Received request "
                        f"cmpl-{i:08x}: prompt: 'tell me about the weather', params: SamplingParams(n=1)"
                    )
                i += 1
            out.write("\n".join(block) + "\n")
    return stats


def run(log: Path) -> tuple[float, int]:
    """(wall s, peak RSS bytes) of `diagnose file LOG --format json` in a fresh process."""
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(_ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    start = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "diagnose", "file", str(log), "--format", "json"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=environment,
    )
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    errors = process.stderr.read().decode(errors="replace") if process.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"diagnose file failed:\n{errors}")
    return wall, usage.ru_maxrss * 1024


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size-mib", type=float, default=512.0, help="the log's size (default %(default)s)")
    add_quick(parser)
    args = parser.parse_args()
    size_mib = 40.0 if args.quick else args.size_mib
    with tempfile.TemporaryDirectory() as scratch:
        plain = Path(scratch) / "plain" / "vllm.log"
        plain.parent.mkdir()
        stats = write_log(plain, size_mib)
        packed = Path(scratch) / "gzip" / "vllm.log.gz"
        packed.parent.mkdir()
        with open(plain, "rb") as source, gzip.open(packed, "wb", compresslevel=1) as target:
            shutil.copyfileobj(source, target)
        print(f"vLLM log: {plain.stat().st_size / _MIB:,.0f} MiB, {stats:,} stats lines")
        print(f"{'file':<12} {'on disk':>10} {'wall':>8} {'peak RSS':>10} {'read':>10}")
        for name, path in (("plain", plain), ("gzip", packed)):
            wall, peak = run(path)
            rate = plain.stat().st_size / _MIB / wall
            disk = path.stat().st_size / _MIB
            print(f"{name:<12} {disk:>7,.0f} MiB {wall:>6.1f} s {peak / _MIB:>6,.0f} MiB {rate:>6,.1f} MiB/s")


if __name__ == "__main__":
    main()
