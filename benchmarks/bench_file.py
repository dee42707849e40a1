"""How long `diagnose file` takes on a big dump, against pandas merely reading it.

    python benchmarks/bench_file.py                   # 1,000,000 requests, a day of 1 Hz, 8 GPUs
    python benchmarks/bench_file.py --requests 200000 --hours 4 --format parquet
    python benchmarks/bench_file.py --format parquet --pictures   # also the Markdown report with pictures
    python benchmarks/bench_file.py --format parquet --compare    # also `diagnose compare` of two such dumps
    python benchmarks/bench_file.py --ladder                      # 1, 8.6 and 30 million requests, a day each

Makes the dump in a temporary folder (or --out), then runs each as its own
command in a fresh process, as a user would, so that start-up, imports and
peak memory are counted the same way:
  1. plain read: a script that imports pandas alone and reads every table with
     pandas.read_csv (or read_parquet / read_json)
  2. the same read with pandas' pyarrow CSV engine, for reference; and the plain pyarrow read (pyarrow
     alone imported, every table read into an Arrow table): the floor any reader of the files pays
  3. `python -m diagnose file DUMP --format json`
  4. with --pictures: `diagnose file DUMP --format markdown -o review.md` (pictures beside it)
  5. with --compare: `diagnose compare DUMP OTHER --format json`, OTHER a second dump of the same
     shape drawn with another seed
With --ladder, the scale ladder of issue 63: a day of 1 Hz metrics and 8 GPUs holding 1, 8.6 (100 a
second) and 30 million requests (``--sizes`` to choose), parquet, each rung made, measured (pandas
read, pyarrow read, diagnose) and removed before the next.
and prints wall time, CPU time (user + system, helper processes included), peak RSS (of the
largest process: diagnose's helpers are each much smaller than it), the ratio of (3) to
(1) and (2), what (4) adds to (3), and the ratio of (5) to (3). Each kind runs once unmeasured
(compiling its modules' bytecode into a cache of the benchmark's own, as installing does), then
``--repeat`` times, the kinds taking turns, so that a machine whose speed drifts slows them alike;
the best is reported.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.quick import add_quick  # noqa: E402

T0 = 1_764_460_800.0
_ROOT = Path(__file__).resolve().parents[1]
GIB = 2**30


def _stretches(rng: np.random.Generator, seconds: int, share: float) -> np.ndarray:
    """True in stretches of 30-300 s covering about ``share`` of the time (a power cap, say)."""
    on = np.zeros(seconds, dtype=bool)
    for start in rng.uniform(0, seconds, int(share * seconds / 165)).astype("int64"):
        on[start : start + int(rng.uniform(30, 300))] = True
    return on


def make_dump(
    folder: Path,
    requests: int,
    hours: float,
    gpus: int,
    fmt: str,
    seed: int = 0,
    job_period_s: float | None = None,
) -> None:
    """A big dump; with ``job_period_s``, a co-located job slows forward 3x for 15 s each period."""
    rng = np.random.default_rng(seed)
    seconds = int(hours * 3600)
    folder.mkdir(parents=True, exist_ok=True)
    ts = np.sort(rng.uniform(0, seconds, requests)) + T0
    length = np.maximum(1, rng.lognormal(np.log(300), 0.5, requests)).round()
    pre = 2 + 0.01 * length * rng.lognormal(0, 0.25, requests)
    forward = (20 + 0.08 * length) * rng.lognormal(0, 0.25, requests)
    job = np.zeros(seconds, dtype=bool)
    if job_period_s:
        for start in np.arange(job_period_s / 2, seconds - 20, job_period_s) + rng.normal(0, 5, 1):
            job[int(start) : int(start) + 15] = True
        forward = np.where(job[(ts - T0).astype("int64").clip(0, seconds - 1)], forward * 3, forward)
    queue = rng.exponential(10, requests)
    post = 2 * rng.lognormal(0, 0.25, requests)
    _write(
        folder / "requests",
        fmt,
        {
            "ts": ts.round(3),
            "id": np.char.add("r", np.arange(requests).astype(str)),
            "latency_ms": (queue + pre + forward + post + 3).round(2),
            "stage_queue_ms": queue.round(2),
            "stage_preprocess_ms": pre.round(2),
            "stage_forward_ms": forward.round(2),
            "stage_postprocess_ms": post.round(2),
            "input_len": length.astype("int64"),
            "output_len": rng.integers(20, 200, requests),
            "status": np.where(rng.random(requests) < 0.001, "error", "ok"),
        },
    )
    tick = T0 + np.arange(seconds, dtype="float64")
    capped = np.column_stack([_stretches(rng, seconds, share=0.05) for _ in range(gpus)]).reshape(-1)
    _write(
        folder / "system",
        fmt,
        {
            "ts": tick,
            "cpu_pct": rng.uniform(10, 30, seconds).round(1),
            "cpu_count": np.full(seconds, 64),
            "mem_used_bytes": rng.integers(60 * GIB, 70 * GIB, seconds),
            "mem_total_bytes": np.full(seconds, 512 * GIB),
        },
    )
    _write(
        folder / "gpu",
        fmt,
        {
            "ts": np.repeat(tick, gpus),
            "gpu": np.tile(np.arange(gpus), seconds),
            "util_pct": rng.uniform(30, 60, seconds * gpus).round(1),
            "mem_used_bytes": rng.integers(40 * GIB, 60 * GIB, seconds * gpus),
            "mem_total_bytes": np.full(seconds * gpus, 80 * GIB),
            "sm_clock_mhz": np.where(capped, 1600, 1980),
            "max_sm_clock_mhz": np.full(seconds * gpus, 1980),
            "power_w": (np.where(capped, 690, 450) + rng.normal(0, 25, seconds * gpus)).round(1),
            "power_limit_w": np.full(seconds * gpus, 700.0),
            "temp_c": rng.integers(50, 70, seconds * gpus),
            # as the recorder writes them: NVML's reasons as ;-joined names
            "throttle_reasons": np.where(
                capped, rng.choice(["sw_power_cap", "sw_power_cap;sw_thermal"], seconds * gpus), "none"
            ),
        },
    )
    pids = 5
    _write(
        folder / "processes",
        fmt,
        {
            "ts": np.repeat(tick, pids),
            "pid": np.tile(1000 + np.arange(pids), seconds),
            "name": np.tile(np.array([f"proc{i}" for i in range(pids)]), seconds),
            "cpu_pct": rng.uniform(0, 150, seconds * pids).round(1),
            "max_thread_cpu_pct": rng.uniform(0, 60, seconds * pids).round(1),
        },
    )
    if job_period_s:
        running = np.flatnonzero(job)
        _write(
            folder / "gpu_processes",
            fmt,
            {
                "ts": np.concatenate([tick, T0 + running.astype("float64")]),
                "gpu": np.zeros(seconds + running.size, dtype="int64"),
                "pid": np.concatenate([np.full(seconds, 1000), np.full(running.size, 31337)]),
                "name": np.concatenate([np.full(seconds, "python"), np.full(running.size, "refresh.py")]),
                "mem_used_bytes": np.concatenate(
                    [rng.integers(40 * GIB, 41 * GIB, seconds), rng.integers(6 * GIB, 7 * GIB, running.size)]
                ),
            },
        )
    _write(
        folder / "allocator",
        fmt,
        {
            "ts": tick,
            "pid": np.full(seconds, 1000),
            "allocated_bytes": rng.integers(40 * GIB, 41 * GIB, seconds),
            "reserved_bytes": rng.integers(42 * GIB, 43 * GIB, seconds),
            "num_alloc_retries": np.zeros(seconds, dtype="int64"),
        },
    )


def _make_apart(folder: Path, requests: int, hours: float, gpus: int, fmt: str, **options: object) -> None:
    """make_dump in a process of its own: the measured commands are children of this one, and a child's
    peak RSS counts what it inherited at fork, so this process must never hold the dump's arrays."""
    context = multiprocessing.get_context("spawn")
    maker = context.Process(target=make_dump, args=(folder, requests, hours, gpus, fmt), kwargs=options)
    maker.start()
    maker.join()
    if maker.exitcode != 0:
        raise SystemExit(f"making the dump failed ({maker.exitcode})")


def _write(stem: Path, fmt: str, columns: dict) -> None:
    table = pa.table(columns)
    if fmt == "csv":
        pa_csv.write_csv(table, f"{stem}.csv")
    elif fmt == "parquet":
        import pyarrow.parquet as pq

        pq.write_table(table, f"{stem}.parquet")
    else:
        table.to_pandas().to_json(f"{stem}.jsonl", orient="records", lines=True)


# The plain pyarrow read: pyarrow alone, every table read into an Arrow table.
_READ_ARROW = """
import sys
from pathlib import Path

import pyarrow.csv
import pyarrow.json
import pyarrow.parquet

for path in sorted(Path(sys.argv[1]).iterdir()):
    if path.suffix == ".csv":
        pyarrow.csv.read_csv(path)
    elif path.suffix == ".parquet":
        pyarrow.parquet.read_table(path)
    elif path.suffix == ".jsonl":
        pyarrow.json.read_json(path)
"""

# The plain read: pandas and nothing else imported, every table read into a DataFrame.
_READ = """
import sys
from pathlib import Path

import pandas as pd

kind, dump = sys.argv[1:]
for path in sorted(Path(dump).iterdir()):
    if path.suffix == ".csv":
        pd.read_csv(path, engine="pyarrow" if kind == "read-pyarrow" else "c")
    elif path.suffix == ".parquet":
        pd.read_parquet(path)
    elif path.suffix == ".jsonl":
        pd.read_json(path, lines=True)
"""


def _command(kind: str, dump: Path, scratch: str) -> list[str]:
    """What a user would type: ``diagnose`` runs as its own command, the read as a bare script."""
    if kind == "read-arrow":
        return [sys.executable, "-c", _READ_ARROW, str(dump)]
    if kind.startswith("read"):
        return [sys.executable, "-c", _READ, kind, str(dump)]
    diagnose = [sys.executable, "-m", "diagnose"]
    if kind == "compare":
        return [*diagnose, "compare", str(dump), str(_other(dump)), "--format", "json"]
    output = ["--format", "json"] if kind == "diagnose" else ["-o", f"{scratch}/review.md"]
    return [*diagnose, "file", str(dump), *output]


def _other(dump: Path) -> Path:
    """Where --compare keeps the second dump: beside the first."""
    return dump.with_name(dump.name + "-other")


# Starts the measured command from a small process and reports its usage. A child's peak RSS counts
# the memory of the process it was forked from (Linux keeps the larger of the two at exec), and this
# benchmark holds numpy and pyarrow: measured from here, every kind would read at least its size.
_LAUNCHER = """
import json, os, sys, time

start = time.perf_counter()
pid = os.fork()
if pid == 0:
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)  # the report itself is not measured
    os.execv(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
print(json.dumps([time.perf_counter() - start, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024,
                  os.waitstatus_to_exitcode(status)]))
"""


def _run(kind: str, dump: Path, bytecode: Path) -> tuple[float, float, int]:
    """One fresh process: (wall s, CPU s of it and its children, the largest peak RSS among them).

    Modules load from the compiled bytecode under ``bytecode`` (written by the first run), as an
    installed package's do: where PYTHONDONTWRITEBYTECODE is set, diagnose's hundred modules would
    otherwise be compiled from source on every run (about 0.1 s), pandas' never (pip compiled them).
    The usage is that of the process and of the children it waited for (the spike helper, compare's
    second side), read with wait4 by a small launcher (see _LAUNCHER).
    """
    environment = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    environment["PYTHONPATH"] = os.pathsep.join([str(_ROOT), os.environ.get("PYTHONPATH", "")])
    environment["PYTHONPYCACHEPREFIX"] = str(bytecode)
    with tempfile.TemporaryDirectory() as scratch:
        result = subprocess.run(
            [sys.executable, "-c", _LAUNCHER, *_command(kind, dump, scratch)],
            capture_output=True,
            env=environment,
            check=False,
        )
    try:
        wall, cpu, peak, code = json.loads(result.stdout.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise SystemExit(f"{kind}: the launcher failed:\n{result.stderr.decode(errors='replace')}") from None
    if code != 0:
        raise SystemExit(f"{kind} failed ({code}):\n{result.stderr.decode(errors='replace')}")
    return wall, cpu, peak


def _measure(kinds: list[str], dump: Path, repeat: int) -> dict[str, tuple[float, float, int]]:
    """Best wall time, the CPU time of that run, and the highest peak RSS of each kind, taking turns."""
    best: dict[str, tuple[float, float, int]] = {}
    with tempfile.TemporaryDirectory() as bytecode:
        for kind in kinds:  # not measured: compiles every module once, as installing a package does
            _run(kind, dump, Path(bytecode))
        for _ in range(repeat):
            for kind in kinds:
                wall, cpu, peak = _run(kind, dump, Path(bytecode))
                old_wall, old_cpu, old_peak = best.get(kind, (float("inf"), 0.0, 0))
                best[kind] = (
                    (wall, cpu, max(peak, old_peak))
                    if wall < old_wall
                    else (old_wall, old_cpu, max(peak, old_peak))
                )
    return best


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=1_000_000)
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--format", choices=("csv", "parquet", "jsonl"), default="csv")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each; the best time is reported")
    parser.add_argument("--out", type=Path, help="keep the dump here instead of a temporary folder")
    parser.add_argument("--pictures", action="store_true", help="also time the Markdown report with pictures")
    parser.add_argument("--compare", action="store_true", help="also time `diagnose compare` of two dumps")
    parser.add_argument("--ladder", action="store_true", help="the scale ladder: a day at several sizes")
    parser.add_argument(
        "--sizes", default="1000000,8640000,30000000", help="with --ladder: request counts, comma-separated"
    )
    add_quick(parser)
    args = parser.parse_args()
    if args.quick:
        args.requests, args.hours, args.gpus = 20_000, 0.25, 1
    if args.ladder:
        sizes = [20_000] if args.quick else [int(size) for size in args.sizes.split(",")]
        _ladder(sizes, args.hours, args.gpus, args.repeat)
        return
    with tempfile.TemporaryDirectory() as scratch:
        dump = args.out or Path(scratch) / "dump"
        start = time.perf_counter()
        _make_apart(dump, args.requests, args.hours, args.gpus, args.format)
        if args.compare:
            _make_apart(_other(dump), args.requests, args.hours, args.gpus, args.format, seed=1)
        size = sum(p.stat().st_size for p in dump.iterdir())
        print(
            f"dump: {args.requests:,} requests, {args.hours:g} h at 1 Hz, {args.gpus} GPUs, "
            f"{args.format}, {size / 2**20:,.0f} MiB (made in {time.perf_counter() - start:.1f} s)"
        )
        kinds = ["read", "read-pyarrow", "diagnose"] if args.format == "csv" else ["read", "diagnose"]
        kinds += ["pictures"] if args.pictures else []
        kinds += ["compare"] if args.compare else []
        results = _measure(kinds, dump, args.repeat)
    for kind, (seconds, cpu, peak) in results.items():
        print(f"{kind:<14} {seconds:6.2f} s   CPU {cpu:6.2f} s   peak RSS {peak / 2**20:7,.0f} MiB")
    diagnose_s = results["diagnose"][0]
    print(f"ratio diagnose / pandas read: {diagnose_s / results['read'][0]:.2f}")
    if "read-pyarrow" in results:
        print(f"ratio diagnose / pandas read (pyarrow engine): {diagnose_s / results['read-pyarrow'][0]:.2f}")
    if "pictures" in results:
        print(f"pictures add: {results['pictures'][0] - diagnose_s:.2f} s to the report (best of each)")
    if "compare" in results:
        print(f"ratio compare of two / diagnose of one: {results['compare'][0] / diagnose_s:.2f}")


def _ladder(sizes: list[int], hours: float, gpus: int, repeat: int) -> None:
    """Each rung a fresh parquet dump of ``hours`` at 1 Hz, measured and removed before the next."""
    print(f"{'requests':>12} {'kind':<12} {'wall s':>8} {'CPU s':>8} {'peak MiB':>9} {'x pyarrow read':>15}")
    for requests in sizes:
        with tempfile.TemporaryDirectory() as scratch:
            dump = Path(scratch) / "dump"
            _make_apart(dump, requests, hours, gpus, "parquet", job_period_s=600)
            results = _measure(["read", "read-arrow", "diagnose"], dump, repeat)
        floor = results["read-arrow"][0]
        for kind, (wall, cpu, peak) in results.items():
            row = f"{requests:>12,} {kind:<12} {wall:8.2f} {cpu:8.2f} {peak / 2**20:9,.0f}"
            print(f"{row} {wall / floor:15.2f}")


if __name__ == "__main__":
    main()
