"""What reading a large profiler trace costs: wall time and peak memory of `diagnose file TRACE`.

    python benchmarks/bench_trace.py [--mb 500] [--gzip]

Writes a Kineto trace of about ``--mb`` MB (the simulated eager model of
fixtures/kernel_trace.py, its steps repeated with their times moved on, so the
trace looks like a long profile of one model), then runs the whole analysis on
it in a child process and reads that process's peak resident memory from the
OS (getrusage). The trace is streamed, so memory grows with the rows kept
(kernels, copies, runtime calls, operators), never with the JSON text.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.quick import add_quick  # noqa: E402
from fixtures.kernel_trace import TracedModel, simulate_trace  # noqa: E402


def write_big_trace(path: Path, megabytes: float, packed: bool) -> int:
    """A trace of about ``megabytes`` of JSON text; returns the number of events."""
    block = simulate_trace(TracedModel(steps=2, small_ops=600, gemm_ops=10, gemm_kernel_us=200), seed=1)
    events = block["traceEvents"]
    length = max(e["ts"] + e["dur"] for e in events) - min(e["ts"] for e in events) + 100.0
    ids = 1 + max(e["args"].get("correlation", 0) for e in events)
    header = {k: v for k, v in block.items() if k != "traceEvents"}
    opened = gzip.open(path, "wt", encoding="utf-8") if packed else open(path, "w", encoding="utf-8")
    written = count = repeat = 0
    with opened as out:
        text = json.dumps(header)[:-1] + ', "traceEvents": [\n'
        out.write(text)
        first = True
        while written < megabytes * 1e6:
            lines = []
            for event in events:
                moved = {**event, "ts": round(event["ts"] + repeat * length, 3)}
                if "correlation" in event["args"]:  # each launch's id is its own, as the profiler's are
                    moved["args"] = {
                        **event["args"],
                        "correlation": event["args"]["correlation"] + repeat * ids,
                    }
                if event["name"].startswith("ProfilerStep#"):
                    moved["name"] = f"ProfilerStep#{repeat * 2 + int(event['name'][13:])}"
                lines.append(("" if first else ",\n") + json.dumps(moved))
                first = False
            chunk = "".join(lines)
            out.write(chunk)
            written += len(chunk)
            count += len(events)
            repeat += 1
        out.write("\n]}\n")
    return count


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mb", type=float, default=500.0, help="size of the trace's JSON text")
    parser.add_argument("--gzip", action="store_true", help="write it gzip'd, as torch.profiler can")
    add_quick(parser)
    args = parser.parse_args()
    if args.quick:
        args.mb = 5.0
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / ("trace.json.gz" if args.gzip else "trace.json")
        events = write_big_trace(path, args.mb, args.gzip)
        size = os.path.getsize(path)
        started = time.perf_counter()
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "diagnose",
                "file",
                str(path),
                "--format",
                "json",
                "-o",
                str(Path(folder) / "r.json"),
            ],
            capture_output=True,
            text=True,
        )
        elapsed = time.perf_counter() - started
        if result.returncode != 0:
            print(result.stderr[-2000:])
            raise SystemExit(f"diagnose file exited {result.returncode}")
        peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # Linux: KiB
        report = json.loads((Path(folder) / "r.json").read_text(encoding="utf-8"))
    found = ", ".join(f"{h['id']} {h['score']:.2f}" for h in report["hypotheses"]) or "nothing"
    print(f"trace: {size / 1e6:,.0f} MB on disk ({args.mb:,.0f} MB of JSON), {events:,} events")
    print(
        f"diagnose file: {elapsed:.1f} s, {events / elapsed:,.0f} events/s, peak memory {peak_mib:,.0f} MiB"
    )
    print(f"found: {found}")


if __name__ == "__main__":
    main()
