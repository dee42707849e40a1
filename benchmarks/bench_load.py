"""Does ``diagnose load`` find a knee that holds the service's known capacity, judge soaks right, and
how fast can its engine send?

    pip install '.[testbed,load]'
    python benchmarks/bench_load.py                  # every part (about 40 minutes)
    python benchmarks/bench_load.py --only knee --seeds 3 --first-seed 1   # three fresh seeds

Parts, most against the testbed's service run with ``--step-ms`` (each model call sleeps that long
instead of computing), whose capacity is set by its configuration: model workers x 1000 / step ms
requests a second, or, batched, the batch size x 1000 / step ms (the batcher runs one batch at a time;
its window sets how long a batch may wait to fill, not how many it holds), a few percent less for the
service's own work between steps:

- **knee**: for each configuration and seed, the bracket ``diagnose load`` finds, its 95 % interval and
  the throughput it measured past it, against the configured capacity and against what the service
  completes when a closed loop of clients never lets it idle, measured apart (its own per-request work
  between model calls makes that a few percent less than configured);
- **llm**: the same against llama.cpp's server (the testbed's engine and tiny model, built first), two
  and four slots, streamed on ``/v1/completions`` with the built-in mix; no configuration sets its
  capacity, so it is measured apart: a closed loop of twice its slots streaming that mix on a new
  server, settled (30 s) and long enough (120 s) that the mix's long prompts come in their share;
- **workers**: the same configuration loaded by one Locust process and by two workers started through
  Locust's own distributed mode: the two brackets;
- **soak**: a soak on the healthy service, on one stalled for 3 s every 45 s (``POST /fault/hang``), and
  on one that leaks 64 KB a request (``--leak-kb``): the verdict and its reasons;
- **weekly**: three runs kept under one name, the third against a model step half as slow again:
  the exit code and what the gate named;
- **engine**: requests a second the load engine can send per core of its own CPU, against a service on
  another core that answers at once.

Run on a quiet machine: the engine and the service share it. ``--quick`` runs one short knee and the
engine part on small inputs (what CI does); its figures mean nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from itertools import islice
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.load_services import (  # noqa: E402
    CONFIGURATIONS,
    GENERATE_BODY,
    SLOTS,
    LlamaServer,
    Service,
    completion_bodies,
    saturated_rps,
)
from benchmarks.quick import add_quick  # noqa: E402
from diagnose.load.workload import fresh_prompts  # noqa: E402
from tests.helpers.service import free_port  # noqa: E402

STEP = ("--baseline", "10s", "--step", "20s", "--resolution", "0.1", "--max-steps", "14")
QUICK_STEP = ("--baseline", "2s", "--step", "3s", "--resolution", "0.99", "--max-steps", "4")


def _load_command(url: str, out: Path, *options: str, path: str = "/generate") -> list[str]:
    """``diagnose load`` against the service's ``path``, its result as JSON on stdout."""
    return [sys.executable, "-m", "diagnose", "load", f"{url}{path}", "-o", str(out), "--format", "json",
            *options]  # fmt: skip


def load(url: str, out: Path, *options: str, workers: int = 0, path: str = "/generate") -> dict:
    """``diagnose load`` to the end (with ``workers`` Locust workers started beside it); its capacity.json."""
    command = _load_command(url, out, *options, path=path)
    port = free_port()
    if workers:
        command += ["--workers", str(workers), "--master-port", str(port)]
    master = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    started = []
    if workers:
        locustfile = str(ROOT / "diagnose" / "load" / "locustfile.py")
        started = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "locust",
                    "--worker",
                    "-f",
                    locustfile,
                    "--master-host",
                    "127.0.0.1",
                    "--master-port",
                    str(port),
                ],
                cwd=ROOT,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for _ in range(workers)
        ]
    try:
        stdout, stderr = master.communicate(timeout=3600)
    finally:
        for worker in started:
            worker.terminate()
            worker.wait(timeout=20)
    if master.returncode != 0:
        raise RuntimeError(f"diagnose load exited {master.returncode}: {stderr[-2000:]}")
    return json.loads(stdout)


_KNEE_HEADER = [
    "| configuration | configured | saturated | seed | bracket (req/s) | holds saturated | "
    "knee's 95 % interval | holds saturated | throughput past it | holds saturated |",
    "|---|---:|---:|---:|---|---|---|---|---|---|",
]


def knee_part(seeds: range, quick: bool, out: Path, names: list[str] | None) -> list[str]:
    rows = list(_KNEE_HEADER)
    configurations = [c for c in CONFIGURATIONS if not names or c.name in names]
    for paced in configurations[:1] if quick else configurations:
        for seed in seeds:
            with Service(paced.workers, paced.step_ms, *paced.service_args()) as service:
                saturated = saturated_rps(
                    f"{service.url}/generate", GENERATE_BODY, paced.clients(), 3.0 if quick else 20.0
                )
                options = (*(QUICK_STEP if quick else STEP), "--soak", "0", "--seed", str(seed))
                result = load(service.url, out / f"knee-{paced.name}-{seed}", *options)
            rows.append(_knee_row(paced.label, f"{paced.capacity_rps:.3g}", saturated, seed, result["knee"]))
    return rows


def _knee_row(label: str, configured: str, saturated: float, seed: int, knee: dict) -> str:
    low, high = _number(knee["kept_up_rps"]), _number(knee["fell_behind_rps"])
    wide_low, wide_high = _number(knee.get("low_rps")), _number(knee.get("high_rps"))
    cap = {key: _number(value) for key, value in (knee["capacity_rps"] or {}).items()}
    past = (
        f"{cap['value']:.3g} ({cap['low']:.3g} to {cap['high']:.3g}) | "
        f"{_yes(cap['low'] <= saturated <= cap['high'])}"
        if cap
        else "collapsed | -"
    )
    return (
        f"| {label} | {configured} | {saturated:.3g} | {seed} | "
        f"{low:.3g} to {high:.3g} | {_yes(low <= saturated <= high)} | "
        f"{wide_low:.3g} to {wide_high:.3g} | {_yes(wide_low <= saturated <= wide_high)} | {past} |"
    )


def llm_part(seeds: range, quick: bool, out: Path) -> list[str]:
    """llama.cpp's server (the testbed's engine and tiny model), loaded on /v1/completions with the
    built-in 70/20/10 mix, at each slot count. No configuration sets its capacity in requests a second,
    so it is measured apart, after the run, on a new server: a closed loop of twice its slots streaming
    new prompts of the mix for 150 s, the first 30 s not counted.

    Both lengths matter. A new server answers faster at first (its first 30 s: 13.4 and 11.5 req/s, the
    same prompts later: 10.0 and 9.5), and the mix's cost is heavy-tailed (a long prompt with its 256
    tokens costs a dozen short ones), so a 30-second window of new prompts read 7.6 to 13.4 req/s on
    one server, following how many long prompts it happened to draw (25 to 40 in 300). The knee's
    interval allows for that draw within its steps (the service time's variance); the reference must
    not carry it too."""
    rows = [
        "| slots | seed | bracket (req/s) | knee's 95 % interval | throughput past it | saturated "
        "(120 s, settled) | interval holds |",
        "|---:|---:|---|---|---|---:|---|",
    ]
    seconds = 3.0 if quick else 150.0
    for slots in SLOTS[:1] if quick else SLOTS:
        for seed in seeds:
            with LlamaServer(slots) as server:
                options = (*(QUICK_STEP if quick else STEP), "--soak", "0", "--seed", str(seed))
                result = load(server.url, out / f"llm-{slots}-{seed}", *options, path="/v1/completions")
            with LlamaServer(slots) as fresh:
                new = completion_bodies(islice(fresh_prompts(10_000 + seed), 4_000))
                saturated = saturated_rps(f"{fresh.url}/v1/completions", new, 2 * slots, seconds)
            knee = result["knee"]
            ends = (_number(knee["kept_up_rps"]), _number(knee["fell_behind_rps"]))
            low, high = _number(knee.get("low_rps")), _number(knee.get("high_rps"))
            cap = {key: _number(value) for key, value in (knee["capacity_rps"] or {}).items()}
            past = f"{cap['value']:.3g} ({cap['low']:.3g} to {cap['high']:.3g})" if cap else "collapsed"
            rows.append(
                f"| {slots} | {seed} | {ends[0]:.3g} to {ends[1]:.3g} | {low:.3g} to {high:.3g} | {past} | "
                f"{saturated:.3g} | {_yes(low <= saturated <= high)} |"
            )
    return rows


def _number(value: float | None) -> float:
    """A figure of capacity.json (JSON has no NaN: a figure not measured is null)."""
    return float("nan") if value is None else float(value)


def _yes(holds: bool) -> str:
    return "yes" if holds else "no"


def workers_part(quick: bool, out: Path) -> list[str]:
    rows = ["| sent by | bracket (req/s) | knee's 95 % interval | throughput past it |", "|---|---|---|---|"]
    options = (*(QUICK_STEP if quick else STEP), "--soak", "0")
    intervals = []
    for label, workers in (("one process", 0), ("two Locust workers", 2)):
        with Service(4, 100.0) as service:
            knee = load(service.url, out / f"workers-{workers}", *options, workers=workers)["knee"]
        cap = {key: _number(value) for key, value in knee["capacity_rps"].items()}
        intervals.append((_number(knee.get("low_rps")), _number(knee.get("high_rps"))))
        rows.append(
            f"| {label} | {knee['kept_up_rps']:.3g} to {knee['fell_behind_rps']:.3g} | "
            f"{intervals[-1][0]:.3g} to {intervals[-1][1]:.3g} | "
            f"{cap['value']:.3g} ({cap['low']:.3g} to {cap['high']:.3g}) |"
        )
    (low_a, high_a), (low_b, high_b) = intervals
    rows.append(f"\nThe two intervals overlap: {_yes(low_a <= high_b and low_b <= high_a)}")
    return rows


def soak_part(quick: bool, out: Path) -> list[str]:
    rows = ["| service | verdict | reasons |", "|---|---|---|"]
    soak = "1m" if quick else "3m"
    options = (*(QUICK_STEP if quick else STEP), "--soak", soak)
    for label, extra, stall in (
        ("healthy", (), False),
        ("stalls 3 s every 45 s", (), True),
        ("leaks 64 KB a request", ("--leak-kb", "64"), False),
    ):
        with Service(1, 50.0, *extra) as service:  # one worker: a hang holds the only model slot
            stop = threading.Event()
            if stall:
                threading.Thread(
                    target=_stall_every, args=(service.url, 45.0, 3.0, stop), daemon=True
                ).start()
            try:
                result = load(service.url, out / f"soak-{label.split()[0]}", *options)
            finally:
                stop.set()
        verdict = result["soak"]
        reasons = "; ".join(verdict["reasons"]) if verdict else "no soak"
        rows.append(f"| {label} | {'stable' if verdict and verdict['stable'] else 'unstable'} | {reasons} |")
    return rows


def _stall_every(url: str, every: float, seconds: float, stop: threading.Event) -> None:
    while not stop.wait(every):
        request = urllib.request.Request(f"{url}/fault/hang?seconds={seconds}", method="POST")
        try:
            urllib.request.urlopen(request, timeout=5).read()
        except OSError:
            return


def weekly_part(quick: bool, out: Path) -> list[str]:
    """Three weekly runs under one name: the standard, the same service again, then one whose model step
    is half as slow again (a slower stage)."""
    rows = ["| week | service | exit | judged | what moved |", "|---|---|---:|---|---|"]
    archive = out / "weekly-archive.sqlite"
    options = (
        *(QUICK_STEP if quick else STEP),
        "--soak",
        "0",
        "--archive",
        "--name",
        "standard",
        "--archive-file",
        str(archive),
    )
    for week, step_ms in ((1, 100.0), (2, 100.0), (3, 150.0)):
        with Service(4, step_ms) as service:
            command = _load_command(service.url, out / f"weekly-{week}", "--seed", str(week), *options)
            done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=3600)
        history = json.loads(done.stdout)["history"]
        moved = "; ".join(
            f"{m['figure']} {m['before']} -> {m['after']}" for m in history["moves"] if m["worse"]
        )
        judged = (
            "the standard"
            if history["against"] is None
            else ("regressed" if history["regressed"] else "no regression")
        )
        rows.append(f"| {week} | 4 x {step_ms:g} ms | {done.returncode} | {judged} | {moved or '-'} |")
    return rows


def engine_part(quick: bool, out: Path) -> list[str]:
    """The engine's CPU per request, against a service pinned to another core that answers at once."""
    cores = sorted(os.sched_getaffinity(0))
    with Service(64, 0.001, cores={cores[-1]}) as service:
        options = (
            "--baseline",
            "2s",
            "--step",
            "3s" if quick else "20s",
            "--start-rate",
            "100" if quick else "300",
            "--growth",
            "1.5",
            "--max-steps",
            "2",
            "--soak",
            "0",
        )
        command = _load_command(service.url, out / "engine", *options)
        master = subprocess.Popen(
            command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        cpu = _engine_cpu(master)
        result = json.loads(master.communicate(timeout=600)[0])
    sent = result["baseline"]["sent"] + sum(s["sent"] for s in result["steps"])
    per_request_ms = cpu * 1000 / sent
    offered = max(s["offered_rps"] for s in result["steps"])
    return [
        "| requests sent | engine CPU | per request | per core | highest rate offered, P99 send lag |",
        "|---:|---:|---:|---:|---|",
        f"| {sent:,} | {cpu:.1f} s | {per_request_ms:.2f} ms | {1000 / per_request_ms:,.0f} req/s | "
        f"{offered:.0f} req/s, {max(s['send_lag_p99_ms'] for s in result['steps']):.0f} ms |",
    ]


def _engine_cpu(master: subprocess.Popen) -> float:
    """CPU seconds of the engine process (the child ``diagnose load`` starts), read until it ends."""
    parent = psutil.Process(master.pid)
    cpu, engine = 0.0, None
    while master.poll() is None:
        try:
            engine = engine or next(
                (c for c in parent.children() if "diagnose.load.engine" in " ".join(c.cmdline())), None
            )
            if engine is not None:
                times = engine.cpu_times()
                cpu = times.user + times.system
        except psutil.Error:
            pass
        time.sleep(0.2)
    return cpu


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--only",
        nargs="+",
        choices=("knee", "llm", "workers", "soak", "weekly", "engine"),
        help="only these parts (llm: builds llama.cpp's server first, five to nine minutes)",
    )
    parser.add_argument(
        "--configurations",
        nargs="+",
        choices=[c.name for c in CONFIGURATIONS],
        help="the knee part: only these (WORKERSxSTEP, or bBATCHxSTEPwWINDOW in ms; default all)",
    )
    parser.add_argument("--seeds", type=int, default=2, help="runs of each configuration (default 2)")
    parser.add_argument(
        "--first-seed", type=int, default=0, help="the first seed (default 0): later ones are fresh draws"
    )
    parser.add_argument("--out", type=Path, help="keep the runs here (default: a temporary folder)")
    add_quick(parser)
    args = parser.parse_args()
    parts = args.only or (
        ("knee", "engine") if args.quick else ("knee", "llm", "workers", "soak", "weekly", "engine")
    )
    out = args.out or Path(tempfile.mkdtemp(prefix="bench-load-"))
    seeds = range(args.first_seed, args.first_seed + (1 if args.quick else args.seeds))
    for part in parts:
        started = time.monotonic()
        if part == "knee":
            lines = knee_part(seeds, args.quick, out, args.configurations)
        elif part == "llm":
            lines = llm_part(seeds, args.quick, out)
        elif part == "workers":
            lines = workers_part(args.quick, out)
        elif part == "soak":
            lines = soak_part(args.quick, out)
        elif part == "weekly":
            lines = weekly_part(args.quick, out)
        else:
            lines = engine_part(args.quick, out)
        print(f"\n## {part} ({time.monotonic() - started:.0f} s)\n")
        print("\n".join(lines), flush=True)


if __name__ == "__main__":
    main()
