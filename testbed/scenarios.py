"""The testbed's scenarios: a healthy service at two loads, and one real fault per root cause it can make.

Each says which root-cause id it injects (None: healthy), how the service is
started, the load, and what happens during the run. Times are fractions of the
run, so a short smoke run and a long benchmark run inject the same story.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import numpy as np
import psutil


def cron_ticks(period_s: tuple[float, float], rng: np.random.Generator, duration_s: float) -> Iterator[float]:
    """Seconds from the injector's start at which a co-located job starts: cron's ticks.

    The period is drawn once from ``period_s`` (scaled down in runs shorter than 10
    minutes, so a short run still sees the job), the first tick falls at a random
    phase, and each later one jitters by up to a tenth of the period, counted start
    to start.
    """
    low, high = period_s
    period = float(rng.uniform(low, high)) * min(1.0, duration_s / 600)
    tick = period * float(rng.uniform(0.5, 1.0))
    while True:
        # The next gap is drawn before this tick is used (the injector draws the job's length in
        # between): the order the recorded runs' seeds were drawn in.
        following = tick + period * float(rng.uniform(0.9, 1.1))
        yield tick
        tick = following


@dataclass(frozen=True)
class Scenario:
    name: str
    cause: str | None
    summary: str
    rate_rps: float = 10.0
    ramp_to_rps: float | None = None
    # Ramp to this multiple of the service's capacity, measured on this machine just before the run
    # (load.measure_capacity): a fixed rate that saturates one machine leaves a faster one at 0.78.
    ramp_to_capacity: float | None = None
    service_args: tuple[str, ...] = ()
    shift_at: float | None = None  # fraction of the run where prompts get longer
    length_factor: float = 1.0
    restart_at: float | None = None  # fraction of the run where the service is restarted
    profile_at: float | None = None  # fraction of the run where the service's profiler is switched on
    hang_at: float | None = None  # fraction of the run where the model's step hangs
    hang_seconds: float = 90.0
    release_memory_at: float | None = None  # fraction of the run where the service frees its cache once
    # The co-located job's period, drawn once from this range, as a crontab line fixes it; each start
    # then jitters by up to a tenth of it, as a loaded host delays a cron tick.
    job_period_s: tuple[float, float] | None = None
    job_seconds: tuple[float, float] = (10.0, 20.0)
    fault_from: float = 0.0  # fraction of the run from which the fault is on (truth.yaml)
    default_duration_s: float = 300.0
    # A benchmark run no shorter than this: a recurring fault needs a few occurrences in the recording
    # before its alignment with the latency can be told from coincidence.
    min_duration_s: float = 0.0
    # Why the benchmark leaves this scenario out unless asked by name: its fault cannot be told from
    # the machine's own noise here, so its label would be wrong whichever way the diagnosis went.
    benchmark_skip: str | None = None
    tags: tuple[str, ...] = field(default_factory=tuple)
    # The fault's strength where it is the tokenizer's cost: its one worker kept this share of the time
    # busy (the passes a prompt chosen on this machine, testbed/strength.py), and the least share a run
    # must reach to count as having the fault (truth.yaml says whether it did).
    tokenizer_busy: float | None = None
    tokenizer_busy_at_least: float | None = None
    # The fault's strength where it is a cold start: the share of the run's requests that arrive while
    # the service loads (its start-up lasts cold_share x the run's length over its starts: --load-s), and
    # the least share a start must make slower than the other requests' P99 (testbed/strength.py).
    cold_share: float | None = None
    cold_share_at_least: float | None = None
    graph_profile: bool = False  # the service writes an onnxruntime profile of its model into the dump
    # The service's arguments with the fault fixed, where the fault is in them (a batch window, thread
    # pools); faults injected by events (a restart, the co-located job) are fixed by leaving them out.
    fixed_service_args: tuple[str, ...] | None = None

    def job_starts(self, rng: np.random.Generator, duration_s: float) -> Iterator[float]:
        """Seconds from the injector's start at which the co-located job starts (cron_ticks)."""
        if self.job_period_s is None:
            raise ValueError(f"scenario {self.name} has no co-located job")
        return cron_ticks(self.job_period_s, rng, duration_s)

    def load_s(self, duration_s: float) -> float | None:
        """How long the service's start-up lasts (``--load-s``) for ``cold_share`` of a run of
        ``duration_s`` to arrive while it loads: the run's start and the restart's share it."""
        if self.cold_share is None:
            return None
        starts = 1 + (self.restart_at is not None)
        return self.cold_share * duration_s / starts

    def without_fault(self) -> Scenario:
        """The same service, load and seed with the fault removed: what a fix of it would deliver."""
        return replace(
            self,
            name=f"{self.name}-fixed",
            cause=None,
            summary=f"{self.name} with its fault removed",
            service_args=self.fixed_service_args
            if self.fixed_service_args is not None
            else self.service_args,
            restart_at=None,
            profile_at=None,
            hang_at=None,
            release_memory_at=None,
            job_period_s=None,
            tokenizer_busy=None,  # the fixed service's tokenizer is not made slow again by its passes
            tokenizer_busy_at_least=None,
            cold_share=None,  # warmed before the load, never restarted: no start-up in the run
            cold_share_at_least=None,
        )

    def unavailable(self) -> str | None:
        """Why this machine cannot run the scenario, or None."""
        if "swap" in self.tags and psutil.swap_memory().total == 0:
            return "the host has no swap: memory-swapping cannot happen here"
        return None


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("healthy-low", None, "healthy service at a light load", rate_rps=4),
        Scenario("healthy-high", None, "healthy service at a busy but sustainable load", rate_rps=14),
        Scenario(
            "cpu-bound-stage",
            "cpu-bound-stage",
            "the pure-Python tokenizer path, several passes a prompt: the tokenizer thread is busy two "
            "thirds of the time and requests queue for it",
            rate_rps=10,
            service_args=("--slow-tokenizer",),
            fixed_service_args=(),
            # One pass kept the thread 10-17 % busy at 10 requests a second, depending on the machine: a
            # slow stage, not a pegged one (the scenario below). Two thirds busy, its queue (rho / (1 - rho)
            # of its cost in M/D/1: twice its cost) makes it the bottleneck on any seed; a run below half
            # busy did not have the fault.
            tokenizer_busy=0.65,
            tokenizer_busy_at_least=0.5,
        ),
        Scenario(
            "cpu-bound-stage-slow-tokenizer",
            "cpu-bound-stage",
            "the pure-Python tokenizer path, once a prompt: ~100 us a token where a compiled tokenizer "
            "takes ~1, its thread mostly idle; every request pays the cost, the long ones most",
            rate_rps=10,
            service_args=("--slow-tokenizer",),
            fixed_service_args=(),
        ),
        Scenario(
            "cpu-bound-stage-event-loop",
            "cpu-bound-stage",
            "the classic async-server mistake: the slow tokenizer runs in the request handler, on the event "
            "loop, four passes a prompt (a length check, a chat template, the model's input), so every "
            "request waits for the others' tokenizing before any stage it logs begins",
            rate_rps=10,
            # One pass kept the loop 26 % busy at 10 requests a second: not the symptom the scenario
            # stands for. Four make the loop the bottleneck (over 90 % busy) while the arrivals stay those
            # of the other CPU scenario; the model's thread, starved of the GIL, queues behind it.
            service_args=("--slow-tokenizer", "--tokenize-on-loop", "--tokenize-passes", "4"),
            fixed_service_args=(),
        ),
        Scenario(
            "co-located-contention",
            "co-located-contention",
            "a cron-style job named like the server takes two cores and 512 MiB for 10-20 s every 90-150 s",
            rate_rps=8,
            job_period_s=(90.0, 150.0),
            default_duration_s=600.0,
            min_duration_s=600.0,
        ),
        Scenario(
            "cold-start-contamination",
            "cold-start-contamination",
            "the service restarts half-way; its first requests wait for the tokenizer and model to be made",
            rate_rps=8,
            restart_at=0.5,
            fault_from=0.5,
            # 3 % of the requests arrive while it loads (two starts: the run's and the restart's), so that
            # a start's slow requests are more than the 1 % above P99: at least 1.5 % must be.
            cold_share=0.03,
            cold_share_at_least=0.015,
        ),
        Scenario(
            "input-length-shift",
            "input-length-shift",
            "prompts get 2.5x longer half-way (the same trace, scaled): a tail-heavy shift",
            rate_rps=6,
            shift_at=0.5,
            length_factor=2.5,
            fault_from=0.5,
        ),
        Scenario(
            "queue-saturation",
            "queue-saturation",
            "the arrival rate ramps from light to past what the service can serve (1.3x its capacity, "
            "measured before the run)",
            rate_rps=4,
            ramp_to_capacity=1.3,
        ),
        Scenario(
            "batch-window-too-long",
            "batch-window-too-long",
            "a dynamic batcher that waits up to 80 ms for a batch of 8 at a light load",
            rate_rps=8,
            service_args=("--max-batch", "8", "--batch-window-ms", "80"),
            fixed_service_args=("--max-batch", "8", "--batch-window-ms", "5"),
        ),
        Scenario(
            "batch-window-short",
            None,
            "batch-window-too-long's batcher and load with a 5 ms window: the fix, and its near miss",
            rate_rps=8,
            service_args=("--max-batch", "8", "--batch-window-ms", "5"),
        ),
        Scenario(
            "oversized-batch",
            "oversized-batch",
            "batches of up to 64 padded prompts at a busy load: on a CPU bigger batches add no throughput, "
            "only padding and latency",
            rate_rps=20,
            service_args=("--max-batch", "64", "--batch-window-ms", "5"),
            fixed_service_args=("--max-batch", "8", "--batch-window-ms", "5"),
        ),
        Scenario(
            "profiler-overhead",
            "profiler-overhead",
            "cProfile switched on half-way (POST /start_profile) on every thread of the service",
            rate_rps=8,
            profile_at=0.5,
            fault_from=0.5,
            benchmark_skip=(
                "this service's time is in native code (onnxruntime, the Rust tokenizer), so a profiler in "
                "the interpreter costs at most the machine's own minute-to-minute drift (median latency "
                "0.92x-1.19x over six runs with cProfile, a Python-level sys.setprofile timer or a 1 kHz "
                "stack sampler): no label is right for it; run it by name to see"
            ),
        ),
        Scenario(
            "engine-stall",
            "engine-stall",
            "half-way, a thread holds the model's lock for 90 s while it waits on a peer that never "
            "answers: requests stay running, nothing is generated, the service's watchdog says so",
            rate_rps=8,
            hang_at=0.5,
        ),
        Scenario(
            "unfused-operators",
            "unfused-operators",
            "a model whose LayerNorms and GELU are written out in elementwise operators, served with "
            "onnxruntime's graph optimisations off: every node runs as written, nothing is fused; the "
            "recording holds the runtime's profile",
            rate_rps=8,
            service_args=("--decomposed-graph", "--graph-optimizations", "off"),
            fixed_service_args=("--decomposed-graph", "--graph-optimizations", "all"),
            graph_profile=True,
        ),
        Scenario(
            "fusion-on",
            None,
            "unfused-operators' model with onnxruntime's graph optimisations on (its default): the "
            "LayerNorms and GELU fused back, the fix, and its near miss",
            rate_rps=8,
            service_args=("--decomposed-graph", "--graph-optimizations", "all"),
            graph_profile=True,
        ),
        Scenario(
            "over-parallelism",
            "over-parallelism",
            "four model workers, each a session whose thread pool has two threads per core: eight threads "
            "a core wanting to run, onnxruntime's pools spinning while they wait for each other",
            rate_rps=10,
            service_args=("--model-workers", "4", "--intra-op-threads", "2x"),
            fixed_service_args=("--model-workers", "1", "--intra-op-threads", "1x"),
        ),
        Scenario(
            "threads-match-cores",
            None,
            "over-parallelism's near miss: one model worker whose pool has a thread per core, busy but not "
            "oversubscribed",
            rate_rps=10,
            service_args=("--model-workers", "1", "--intra-op-threads", "1x"),
        ),
        Scenario(
            "memory-cleanup-per-request",
            "memory-cleanup-per-request",
            "memory tidied after every forward, as the pseudo-optimisation does: onnxruntime's arena shrunk "
            "at the end of each run, a full garbage collection, the C heap trimmed back to the OS",
            rate_rps=8,
            service_args=("--memory-cleanup", "per-request"),
            fixed_service_args=("--memory-cleanup", "off"),
        ),
        Scenario(
            "memory-released-once",
            None,
            "memory-cleanup-per-request's near miss: the same service frees its cached memory once, "
            "half-way (POST /admin/release_memory), as after a load spike",
            rate_rps=8,
            service_args=("--memory-cleanup", "on-demand"),
            release_memory_at=0.5,
        ),
        Scenario(
            "memory-swapping",
            "memory-swapping",
            "a job holds more memory than the host has free, so the server's pages go to swap",
            rate_rps=8,
            tags=("swap",),
        ),
    )
}
