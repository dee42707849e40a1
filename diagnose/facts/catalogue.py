"""Every fact a rule may name: its unit, what it means, and the evidence it needs.

Rules are validated against this list, so a misspelt fact is an error at load
time, and a rule whose facts are absent can say which evidence was missing.

Over 500 lines, on purpose: one entry per fact, a table read top to bottom; split, it would
be harder to see that a fact is there, and how it is named beside its neighbours.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from diagnose.facts.needs import ANYTHING, Needs, columns, either, event, every, manifest, probe, said, table


class FactUnit(StrEnum):
    """What a fact's value is: a rule's expression reads a name, an id or a time as text, a bool as true or
    false, and every other unit as a number."""

    MS = "ms"
    S = "s"
    US = "us"
    RATIO = "ratio"  # 0-1
    FACTOR = "factor"  # a multiplier
    PCT = "pct"  # 0-100
    P = "p"  # a probability (a test's p-value)
    BYTES = "bytes"
    COUNT = "count"
    RPS = "rps"
    NUMBER = "number"  # a plain figure: per core, per request
    CELSIUS = "c"
    NAME = "name"
    TIME = "time"
    ID = "id"
    BOOL = "bool"


@dataclass(frozen=True)
class FactSpec:
    unit: FactUnit
    needs: Needs  # the evidence that must be there for the fact to exist
    meaning: str


_REQ = table("requests")
_STAGES = said("requests: stage_<name>_ms columns", columns("requests", "stage_<name>_ms"))
_INPUT = columns("requests", "input_len")
_RESTART = said(
    "restart times (manifest process_start or events: restart/deploy)",
    either(manifest("process_start"), event("restart"), event("deploy")),
)
_OOM = event("oom")
_QUEUE = columns("requests", "stage_queue_ms")
_LATENCY = columns("requests", "ts", "latency_ms")
_SPIKES = said("requests (per-second latency) with enough spike episodes to measure it", _LATENCY)
_RHO = said(
    "requests: stage_queue_ms, and gpu: util_pct, requests: batch_size, or a model stage (stage_forward_ms)",
    every(
        _QUEUE,
        either(
            columns("gpu", "util_pct"),
            columns("requests", "batch_size"),
            columns("requests", "stage_forward_ms"),
        ),
    ),
)
_LOAD_STEPS = said(
    "a load test's report with the server's own statistics (perf_analyzer's steps: load_steps)",
    columns("load_steps", "server_queue_ms", "server_latency_ms"),
)
_LOAD_STEPS_BUSY = said(
    "a load test's report with the server's executions, compute and inference counts (perf_analyzer)",
    columns("load_steps", "server_executions", "server_compute_ms", "server_inferences"),
)
_FIRST_TOKEN = said(
    "a text-generation benchmark's result (vLLM bench serve, SGLang bench_serving, JetStream: load_steps)",
    every(
        columns("load_steps", "ttft_p50_ms", "throughput_rps"),
        either(columns("load_steps", "tpot_p50_ms"), columns("load_steps", "itl_p50_ms")),
    ),
)
_BATCH_WAIT = columns("requests", "stage_batch_wait_ms")
_BATCH = columns("requests", "batch_size", "stage_forward_ms")
_KV = columns("server", "kv_cache_usage_pct", where="an engine's stats log or /metrics")
_ENGINE = said(
    "a serving engine's stats (server table) or log events", either(table("server"), table("events"))
)
_OUTPUT = said(
    "requests: output_len and latency_ms, on each side of a latency shift",
    columns("requests", "ts", "output_len", "latency_ms"),
)
_GENERATION = either(columns("requests", "ttft_ms"), columns("requests", "stage_decode_ms"))
_TTFT = said("requests: ttft_ms (or stage_decode_ms), on each side of a TTFT shift", _GENERATION)
_TTFT_INPUT = said(
    "requests: ttft_ms (or stage_decode_ms), on each side of a TTFT shift, and input_len",
    every(_GENERATION, _INPUT),
)
_TPOT = either(columns("requests", "tpot_ms"), columns("requests", "stage_decode_ms", "output_len"))
_THREADS_HELD = said(
    "processes: num_threads of the server, and server: queue_depth or running",
    every(
        columns("processes", "num_threads"),
        either(columns("server", "queue_depth"), columns("server", "running")),
    ),
)
_STREAMS = columns(
    "requests", "ts", "latency_ms", "ttft_ms", "itl_max_ms", "itl_max_at_ms", where="streamed answers"
)
_LONG = said(
    "requests: ts, latency_ms, input_len, and ttft_ms and tpot_ms (or stage_decode_ms, output_len)",
    every(
        columns("requests", "ts", "latency_ms", "input_len"),
        either(
            columns("requests", "ttft_ms", "tpot_ms"), columns("requests", "stage_decode_ms", "output_len")
        ),
    ),
)
_COLOCATED = said(
    "processes or gpu_processes (per-process CPU or GPU memory) and requests",
    every(either(table("processes"), table("gpu_processes")), _REQ),
)
# One wording for the whole trace, so that a rule missing several of its facts asks for it once.
_TRACE = _KERNELS = _COPIES = said(
    "a profiler trace (torch.profiler: gpu_activity, host_calls)",
    either(table("gpu_activity"), table("host_calls")),
)
_STEPS = said("a profiler trace with ProfilerStep annotations (host_calls)", columns("host_calls", "step"))
_RUNQ = columns("system", "procs_running", "cpu_count")
_SERVER_ROWS = columns("processes", "cpu_pct", "num_threads")
_SERVER = said("processes: the server's rows (cpu_pct, num_threads; cores_allowed)", _SERVER_ROWS)
_SWITCHES = said(
    "processes: ctx_switches_voluntary_per_s and ctx_switches_involuntary_per_s of the server",
    columns("processes", "ctx_switches_voluntary_per_s", "ctx_switches_involuntary_per_s"),
)
_DEVICE_ALLOCS = columns("allocator", "num_device_alloc", where="PyTorch memory_stats, 2.1+")
_CPU_GRAPH = said(
    "a profile of a model run on the host (onnxruntime's enable_profiling, a CPU trace), with its steps",
    columns("host_calls", "step"),
)
_SWAP_RATES = either(columns("system", "swap_in_per_s"), columns("system", "swap_out_per_s"))
_SWAP = said(
    "system: swap_in_per_s or swap_out_per_s (else swap_used_bytes)",
    either(_SWAP_RATES, columns("system", "swap_used_bytes")),
)
_SWAP_EPISODES = said(
    "system: swap_in_per_s or swap_out_per_s, and latency episodes", every(_SWAP_RATES, _LATENCY)
)
_POOL = said(
    "allocator: intra_op_threads (the helper), or the manifest's environment: OMP_NUM_THREADS, ...",
    either(columns("allocator", "intra_op_threads"), manifest("environment")),
)
_FAULTS = "processes: minor_faults_per_s (diagnose record)"
_PROFILER = event("profiler_start")
_SLO = said("an SLO (--slo-p99-ms or manifest slo_p99_ms)", manifest("slo_p99_ms"))

CATALOGUE: dict[str, FactSpec] = {
    "requests.count": FactSpec(FactUnit.COUNT, _REQ, "requests in the dump"),
    "requests.duration_s": FactSpec(FactUnit.S, _REQ, "time from the first to the last request"),
    "requests.throughput_rps": FactSpec(FactUnit.RPS, _REQ, "requests per second over the dump"),
    "requests.error_rate": FactSpec(
        FactUnit.RATIO, columns("requests", "status"), "share of requests not ok"
    ),
    "requests.oom_count": FactSpec(FactUnit.COUNT, columns("requests", "status"), "requests with status oom"),
    "latency.mean_ms": FactSpec(FactUnit.MS, _REQ, "mean end-to-end latency"),
    "latency.p50_ms": FactSpec(FactUnit.MS, _REQ, "median end-to-end latency"),
    "latency.p95_ms": FactSpec(FactUnit.MS, _REQ, "95th percentile latency"),
    "latency.p99_ms": FactSpec(FactUnit.MS, _REQ, "99th percentile latency"),
    "latency.p999_ms": FactSpec(FactUnit.MS, _REQ, "99.9th percentile latency"),
    "latency.window_p99_max_ms": FactSpec(FactUnit.MS, _REQ, "highest P99 of any time window"),
    "latency.window_p99_min_ms": FactSpec(FactUnit.MS, _REQ, "lowest P99 of any time window"),
    "slo.p99_ms": FactSpec(FactUnit.MS, _SLO, "P99 target"),
    "latency.p99_over_slo": FactSpec(
        FactUnit.FACTOR, said("an SLO and requests", every(_SLO, _REQ)), "P99 divided by its target"
    ),
    "stages.count": FactSpec(FactUnit.COUNT, _STAGES, "stages with timings"),
    "stages.tail_driver.name": FactSpec(FactUnit.NAME, _STAGES, "stage that explains most of the P99 excess"),
    "stages.tail_driver.excess_share": FactSpec(
        FactUnit.RATIO, _STAGES, "share of (tail mean - overall mean) latency due to that stage"
    ),
    "stages.wait.share_mean": FactSpec(FactUnit.RATIO, _STAGES, "queue and batch-wait share of mean latency"),
    "stages.unaccounted_share": FactSpec(
        FactUnit.RATIO, _STAGES, "share of mean latency in no logged stage (unmeasured waiting or work)"
    ),
    "stages.unaccounted_load_corr": FactSpec(
        FactUnit.RATIO,
        said(
            "requests: latency_ms and stage_<name>_ms columns",
            columns("requests", "latency_ms", "stage_<name>_ms"),
        ),
        "rank correlation of each request's latency in no stage with the arrivals in the second before it",
    ),
    "stages.generation_share": FactSpec(
        FactUnit.RATIO,
        columns("requests", "stage_decode_ms", where="LLM token generation"),
        "share of mean latency spent generating tokens",
    ),
    "cpu_stage.name": FactSpec(FactUnit.NAME, _STAGES, "the CPU-side stage with the largest share"),
    "cpu_stage.share_mean": FactSpec(FactUnit.RATIO, _STAGES, "its share of mean latency"),
    "cpu_stage.share_tail": FactSpec(FactUnit.RATIO, _STAGES, "its share of the latency of P99 requests"),
    "cpu_stage.excess_share": FactSpec(FactUnit.RATIO, _STAGES, "its share of the P99 excess"),
    "cpu_stage.p99_ms": FactSpec(FactUnit.MS, _STAGES, "its own P99"),
    "cpu_stage.wait_share": FactSpec(
        FactUnit.RATIO, _STAGES, "share of mean latency spent waiting for its worker (stage_<name>_queue_ms)"
    ),
    "cpu_stage.cost_share": FactSpec(
        FactUnit.RATIO, _STAGES, "its share of mean latency, waiting for it included"
    ),
    "cpu_stage.cost_excess_share": FactSpec(
        FactUnit.RATIO, _STAGES, "its share of the P99 excess, waiting for it included"
    ),
    "cpu_stage.us_per_token": FactSpec(
        FactUnit.US,
        _STAGES,
        "what each further token costs it (a tokenize or detokenize stage): its time's slope",
    ),
    "cpu_stages.share_mean": FactSpec(FactUnit.RATIO, _STAGES, "all CPU-side stages' share of mean latency"),
    "forward.share_mean": FactSpec(FactUnit.RATIO, _STAGES, "model forward's share of mean latency"),
    "forward.share_tail": FactSpec(FactUnit.RATIO, _STAGES, "forward's share of the latency of P99 requests"),
    "forward.p99_ms": FactSpec(FactUnit.MS, _STAGES, "forward's own P99"),
    "latency.shift_at": FactSpec(FactUnit.TIME, _REQ, "when median latency shifted most (best single split)"),
    "latency.rise_ratio": FactSpec(FactUnit.FACTOR, _REQ, "median latency after the shift / before"),
    "input_len.rise_ratio": FactSpec(FactUnit.FACTOR, _INPUT, "median input length after the shift / before"),
    "input_len.latency_corr": FactSpec(
        FactUnit.RATIO, _INPUT, "Spearman correlation of input length and latency"
    ),
    "input_len.explained_share": FactSpec(
        FactUnit.RATIO, _INPUT, "share of the latency rise that the before-shift length model predicts"
    ),
    "latency.unexplained_ratio": FactSpec(
        FactUnit.FACTOR, _INPUT, "median latency after the shift / what input length predicts"
    ),
    "latency.tail_shift_at": FactSpec(
        FactUnit.TIME, _REQ, "when window-P95 latency shifted most (best single split)"
    ),
    "latency.tail_rise_ratio": FactSpec(FactUnit.FACTOR, _REQ, "P95 latency after that split / before"),
    "latency.median_at_tail_ratio": FactSpec(
        FactUnit.FACTOR, _REQ, "median latency after that split / before"
    ),
    "input_len.tail_rise_ratio": FactSpec(
        FactUnit.FACTOR, _INPUT, "P95 input length after the tail split / before"
    ),
    "input_len.tail_explained_share": FactSpec(
        FactUnit.RATIO, _INPUT, "share of the P95 rise that the before-split length model predicts"
    ),
    "latency.tail_unexplained_ratio": FactSpec(
        FactUnit.FACTOR, _INPUT, "P95 latency after the tail split / what input length predicts"
    ),
    "coldstart.restarts": FactSpec(FactUnit.COUNT, _RESTART, "(re)starts followed by requests in the dump"),
    "coldstart.cold_requests": FactSpec(FactUnit.COUNT, _RESTART, "requests served before latency settled"),
    "coldstart.cold_window_s": FactSpec(FactUnit.S, _RESTART, "mean time from a start until latency settled"),
    "coldstart.cold_p50_ms": FactSpec(FactUnit.MS, _RESTART, "median latency of cold requests"),
    "coldstart.warm_p50_ms": FactSpec(FactUnit.MS, _RESTART, "median latency of warm requests"),
    "coldstart.slowdown": FactSpec(FactUnit.FACTOR, _RESTART, "cold median / warm median"),
    "coldstart.p99_warm_ms": FactSpec(FactUnit.MS, _RESTART, "P99 without the cold requests"),
    "coldstart.p99_inflation": FactSpec(FactUnit.FACTOR, _RESTART, "P99 with cold requests / without"),
    "coldstart.tail_share": FactSpec(FactUnit.RATIO, _RESTART, "share of requests above P99 that are cold"),
    "coldstart.cold_in_tail": FactSpec(
        FactUnit.COUNT, _RESTART, "cold requests slower than warm traffic's P99"
    ),
    "coldstart.worst_share": FactSpec(
        FactUnit.RATIO, _RESTART, "of the N slowest requests (N: cold_in_tail), the share that are cold"
    ),
    "gpu.count": FactSpec(FactUnit.COUNT, table("gpu"), "GPUs in the dump"),
    "gpu.util_pct.mean": FactSpec(FactUnit.PCT, columns("gpu", "util_pct"), "mean GPU utilisation"),
    "gpu.util_pct.p95": FactSpec(FactUnit.PCT, columns("gpu", "util_pct"), "95th percentile GPU utilisation"),
    "gpu.mem_used_pct.max": FactSpec(
        FactUnit.PCT, columns("gpu", "mem_used_bytes", "mem_total_bytes"), "peak GPU memory use"
    ),
    "gpu.sm_clock_ratio.p50": FactSpec(
        FactUnit.RATIO,
        columns("gpu", "sm_clock_mhz", "max_sm_clock_mhz"),
        "median SM clock / its maximum while busy, of the most throttled GPU",
    ),
    "gpu.sm_clock_ratio.throttled_p50": FactSpec(
        FactUnit.RATIO,
        columns("gpu", "sm_clock_mhz", "max_sm_clock_mhz", "throttle_reasons"),
        "the same median, in the busy samples that report a slowing reason",
    ),
    "gpu.throttled_share": FactSpec(
        FactUnit.RATIO,
        columns("gpu", "throttle_reasons"),
        "busy samples of the most throttled GPU held down by a reason",
    ),
    "gpu.throttle_gpu": FactSpec(
        FactUnit.NAME, columns("gpu", "sm_clock_mhz"), "the GPU the throttle facts are of"
    ),
    "gpu.throttle_reason": FactSpec(
        FactUnit.NAME, columns("gpu", "throttle_reasons"), "the most frequent slowing reason"
    ),
    "gpu.throttle_statements": FactSpec(
        FactUnit.COUNT,
        said("log events (a GPU monitor's own lines, such as DCGM's health watch)", table("events")),
        "lines in which the GPU's monitor said its clocks were held down (throttle events: DCGM's "
        "'Detected clocks event due to thermal violation in GPU 2', its diagnostics' violation seconds)",
    ),
    "gpu.throttle_line": FactSpec(
        FactUnit.NAME,
        event("throttle"),
        "the first line in which the GPU's monitor said its clocks were held down",
    ),
    "gpu.temp_c.max": FactSpec(FactUnit.CELSIUS, columns("gpu", "temp_c"), "highest GPU temperature"),
    "gpu.throttle_forward_cost": FactSpec(
        FactUnit.FACTOR,
        every(columns("gpu", "throttle_reasons"), columns("requests", "stage_forward_ms")),
        "forward time throttled / not",
    ),
    "host.cpu_pct.mean": FactSpec(FactUnit.PCT, columns("system", "cpu_pct"), "mean host CPU (all cores)"),
    "host.cpu_pct.p95": FactSpec(FactUnit.PCT, columns("system", "cpu_pct"), "95th percentile host CPU"),
    "host.mem_used_pct.max": FactSpec(
        FactUnit.PCT, columns("system", "mem_used_bytes", "mem_total_bytes"), "peak host memory use"
    ),
    "host.swapping_share": FactSpec(
        FactUnit.RATIO,
        _SWAP,
        "samples with swap traffic (or swap use growing)",
    ),
    "host.swap_traffic_per_s.p95": FactSpec(
        FactUnit.BYTES,
        _SWAP,
        "P95 swap traffic a second",
    ),
    "host.swap_throughput_ratio": FactSpec(
        FactUnit.FACTOR,
        said("system: swap rates and requests", every(_SWAP_RATES, _REQ)),
        "requests per second while swapping / otherwise",
    ),
    "host.paging_in_spikes_share": FactSpec(
        FactUnit.RATIO,
        _SWAP_EPISODES,
        "the latency episodes' seconds in which the host paged",
    ),
    "host.paging_in_spikes_p_value": FactSpec(
        FactUnit.P,
        _SWAP_EPISODES,
        "how often the latency episodes, shifted in time at random, catch as much paging",
    ),
    "host.rss_growth.bytes": FactSpec(
        FactUnit.BYTES, columns("processes", "rss_bytes"), "largest growth of one process's RSS, to its peak"
    ),
    "host.rss_growth.pid": FactSpec(
        FactUnit.ID, columns("processes", "rss_bytes"), "the process whose RSS grew most"
    ),
    "host.rss_growth.process": FactSpec(
        FactUnit.NAME,
        columns("processes", "rss_bytes"),
        "that process as the report names it (pid or process-exporter group)",
    ),
    "host.rss_growth.name": FactSpec(FactUnit.NAME, columns("processes", "rss_bytes", "name"), "its name"),
    "sampling.interval_s": FactSpec(
        FactUnit.S,
        said(
            "a time-series table",
            either(*(table(t) for t in ("system", "gpu", "processes", "server", "series"))),
        ),
        "the finest sampling interval in the dump",
    ),
    "sampling.has_requests": FactSpec(FactUnit.BOOL, ANYTHING, "the dump has per-request latencies"),
    "sampling.has_latency_averages": FactSpec(
        FactUnit.BOOL,
        ANYTHING,
        "the dump has latency only as per-interval means (a serving engine's /metrics)",
    ),
    "host.cpu_count": FactSpec(FactUnit.COUNT, columns("system", "cpu_count"), "logical CPUs"),
    "thread.busiest.cpu_pct": FactSpec(
        FactUnit.PCT,
        columns("processes", "max_thread_cpu_pct"),
        "P95 of the server's busiest thread's CPU (100 = a core; any process's where the server is unknown)",
    ),
    "thread.busiest.pid": FactSpec(FactUnit.ID, columns("processes", "max_thread_cpu_pct"), "its process id"),
    "thread.busiest.process": FactSpec(
        FactUnit.NAME,
        columns("processes", "max_thread_cpu_pct"),
        "its process as the report names it (pid or group)",
    ),
    "thread.busiest.name": FactSpec(
        FactUnit.NAME, columns("processes", "max_thread_cpu_pct"), "its process name"
    ),
    "thread.busiest.process_cpu_pct": FactSpec(
        FactUnit.PCT, columns("processes", "cpu_pct"), "mean CPU of that whole process (100 = a core)"
    ),
    "allocator.stranded_bytes.max": FactSpec(
        FactUnit.BYTES, columns("allocator", "reserved_bytes", "allocated_bytes"), "peak reserved - allocated"
    ),
    "allocator.stranded_share.max": FactSpec(
        FactUnit.RATIO,
        columns("allocator", "reserved_bytes", "allocated_bytes"),
        "peak (reserved - allocated) / reserved",
    ),
    "allocator.largest_free_block_bytes.min": FactSpec(
        FactUnit.BYTES, columns("allocator", "largest_free_block_bytes"), "smallest largest-free-block seen"
    ),
    "allocator.alloc_retries": FactSpec(
        FactUnit.COUNT, columns("allocator", "num_alloc_retries"), "retries during the dump"
    ),
    "allocator.ooms": FactSpec(
        FactUnit.COUNT, columns("allocator", "num_ooms"), "allocator OOMs during the dump"
    ),
    "spikes.latency.episodes": FactSpec(FactUnit.COUNT, _SPIKES, "P99 latency spike episodes"),
    "spikes.latency.episode_s": FactSpec(FactUnit.S, _SPIKES, "median length of a latency episode"),
    "spikes.latency.peak_ratio": FactSpec(FactUnit.FACTOR, _SPIKES, "median episode peak / its baseline"),
    "spikes.latency.periodic": FactSpec(FactUnit.BOOL, _SPIKES, "the episodes recur with a regular period"),
    "spikes.latency.period_s": FactSpec(FactUnit.S, _SPIKES, "estimated period of the latency episodes"),
    "spikes.latency.period_jitter_s": FactSpec(
        FactUnit.S, _SPIKES, "spread of the episodes around that period"
    ),
    "spikes.latency.period_p_value": FactSpec(
        FactUnit.P, _SPIKES, "chance of such regularity at random times"
    ),
    "spikes.throughput.change": FactSpec(
        FactUnit.FACTOR, _SPIKES, "throughput in latency episodes / outside"
    ),
    "spikes.throughput.coincidence": FactSpec(
        FactUnit.RATIO, _SPIKES, "latency episodes with a throughput episode"
    ),
    "spikes.colocated.signal": FactSpec(
        FactUnit.NAME, _COLOCATED, "best-aligned signal of a non-server process"
    ),
    "spikes.colocated.pid": FactSpec(FactUnit.NAME, _COLOCATED, "its process ids (one or more)"),
    "spikes.colocated.process": FactSpec(
        FactUnit.NAME,
        _COLOCATED,
        "that process as the report names it: its process ids, or its process-exporter group",
    ),
    "spikes.colocated.name": FactSpec(FactUnit.NAME, _COLOCATED, "its process name"),
    "spikes.colocated.cmdline": FactSpec(FactUnit.NAME, _COLOCATED, "its command line"),
    "spikes.colocated.coincidence": FactSpec(FactUnit.RATIO, _COLOCATED, "latency episodes it overlaps"),
    "spikes.colocated.locked": FactSpec(
        FactUnit.RATIO, _COLOCATED, "latency episodes it starts at one common lag"
    ),
    "spikes.colocated.p_value": FactSpec(
        FactUnit.P,
        _COLOCATED,
        "chance of that locking (circular shifts), corrected for the processes tried (Holm)",
    ),
    "spikes.colocated.lag_s": FactSpec(
        FactUnit.S, _COLOCATED, "its episode start minus the latency episode's"
    ),
    "spikes.colocated.footprint": FactSpec(FactUnit.NAME, _COLOCATED, "how much it rises in its episodes"),
    "spikes.colocated.cpu_rise_pct": FactSpec(
        FactUnit.PCT, _COLOCATED, "how much its CPU rises in its episodes, in percent of one core"
    ),
    "spikes.contender.process": FactSpec(
        FactUnit.NAME, _COLOCATED, "the other process whose runs latency rises with most (by the test below)"
    ),
    "spikes.contender.cmdline": FactSpec(FactUnit.NAME, _COLOCATED, "its command line"),
    "spikes.contender.runs": FactSpec(FactUnit.COUNT, _COLOCATED, "its episodes (runs) in the dump"),
    "spikes.contender.latency_ratio": FactSpec(
        FactUnit.FACTOR,
        _COLOCATED,
        "latency while it runs / otherwise (geometric means of the per-window P50)",
    ),
    "spikes.contender.p_value": FactSpec(
        FactUnit.P,
        _COLOCATED,
        "chance of so high a ratio with its runs at random times (circular shifts, Holm)",
    ),
    "spikes.contender.runs_worse_share": FactSpec(
        FactUnit.RATIO,
        _COLOCATED,
        "share of its runs during which latency was 1.25x or more what it is otherwise",
    ),
    "spikes.contender.periodic": FactSpec(
        FactUnit.BOOL, _COLOCATED, "its own runs recur on a schedule (the periodicity test of docs/spikes.md)"
    ),
    "spikes.contender.period_s": FactSpec(FactUnit.S, _COLOCATED, "the period of its runs"),
    "spikes.contender.period_p_value": FactSpec(
        FactUnit.P, _COLOCATED, "chance of runs at uniformly random times being as regular"
    ),
    "spikes.contender.throughput_ratio": FactSpec(
        FactUnit.FACTOR, _COLOCATED, "requests per second while it runs / otherwise"
    ),
    "queue.wait_growth": FactSpec(
        FactUnit.FACTOR, _QUEUE, "queue wait in the busiest quarter / the quietest"
    ),
    "queue.knee_rps": FactSpec(FactUnit.RPS, _QUEUE, "lowest arrival rate at which queue wait doubled"),
    "queue.recommended_rps": FactSpec(
        FactUnit.RPS, _QUEUE, "70 % of the knee: an operating point with headroom"
    ),
    "queue.rho.max": FactSpec(FactUnit.RATIO, _RHO, "utilisation of the busiest window"),
    "loadtest.steps": FactSpec(FactUnit.COUNT, _LOAD_STEPS, "steps of the load test that reported figures"),
    "loadtest.queue_share": FactSpec(
        FactUnit.RATIO,
        _LOAD_STEPS,
        "the largest share of a request's time in the server spent in its queue, over the steps with more "
        "than one request outstanding (a queue's utilisation, where the model computed all along)",
    ),
    "loadtest.queue_load": FactSpec(FactUnit.NAME, _LOAD_STEPS, "that step's load: a concurrency or a rate"),
    "loadtest.queue_ms": FactSpec(FactUnit.MS, _LOAD_STEPS, "the server's queue per request at that step"),
    "loadtest.server_latency_ms": FactSpec(
        FactUnit.MS, _LOAD_STEPS, "a request's time in the server at that step"
    ),
    "loadtest.held_share": FactSpec(
        FactUnit.RATIO,
        _LOAD_STEPS_BUSY,
        "the largest share of a request's time in the server spent in its queue at a step of a closed loop "
        "where that share exceeds the model's busy share (requests queue behind one another only while the "
        "model computes: the rest is the batcher holding them)",
    ),
    "loadtest.held_load": FactSpec(FactUnit.NAME, _LOAD_STEPS_BUSY, "that step's load (a concurrency)"),
    "loadtest.held_ms": FactSpec(FactUnit.MS, _LOAD_STEPS_BUSY, "the queue per request at that step"),
    "loadtest.held_compute_ms": FactSpec(
        FactUnit.MS, _LOAD_STEPS_BUSY, "the server's compute per request at that step"
    ),
    "loadtest.held_busy": FactSpec(
        FactUnit.FACTOR, _LOAD_STEPS_BUSY, "seconds the model computed per second at that step"
    ),
    "loadtest.model_busy": FactSpec(
        FactUnit.FACTOR,
        _LOAD_STEPS_BUSY,
        "seconds the model computed per second at that step (one instance: its busy share; above 1, "
        "several computed at once)",
    ),
    "loadtest.first_token_wait_share": FactSpec(
        FactUnit.RATIO,
        _FIRST_TOKEN,
        "the largest share, over a benchmark's runs, of the median request's time to first token beyond what "
        "its own prompt and the engine's steps can take (two decode steps, and the run's mean interval "
        "between completions, within which the engine prefilled a prompt on average): time spent behind "
        "other requests",
    ),
    "loadtest.first_token_load": FactSpec(
        FactUnit.NAME,
        _FIRST_TOKEN,
        "that run's load: its requests, rate and concurrency (or requests in flight) as the tool said",
    ),
    "loadtest.first_token_ms": FactSpec(FactUnit.MS, _FIRST_TOKEN, "that run's median time to first token"),
    "loadtest.first_token_bound_ms": FactSpec(
        FactUnit.MS,
        _FIRST_TOKEN,
        "the most a first token takes without waiting on other requests at that run: two decode steps "
        "(its median TPOT, or ITL) and the run's mean interval between completions",
    ),
    "loadtest.completed_while_waiting": FactSpec(
        FactUnit.COUNT,
        _FIRST_TOKEN,
        "requests the engine completed, at that run's throughput, while its median request waited for its "
        "first token",
    ),
    "queue.rho.p10": FactSpec(FactUnit.RATIO, _RHO, "utilisation of the quietest tenth of the windows"),
    "queue.mm1_corr": FactSpec(FactUnit.RATIO, _RHO, "Spearman of queue wait and rho/(1-rho)"),
    "batch.wait.share_mean": FactSpec(FactUnit.RATIO, _BATCH_WAIT, "batch waiting's share of mean latency"),
    "batch.wait.share_p50": FactSpec(
        FactUnit.RATIO,
        _BATCH_WAIT,
        "the median request's share of its own latency spent waiting for its batch",
    ),
    "batch.wait.p50_ms": FactSpec(FactUnit.MS, _BATCH_WAIT, "median time a request waits for its batch"),
    "batch.wait.p99_ms": FactSpec(FactUnit.MS, _BATCH_WAIT, "P99 of that wait"),
    "batch.wait_to_forward": FactSpec(
        FactUnit.FACTOR,
        columns("requests", "stage_batch_wait_ms", "stage_forward_ms"),
        "median batch wait / median forward time",
    ),
    "batch.size.p50": FactSpec(
        FactUnit.COUNT, columns("requests", "batch_size"), "median size of a request's batch"
    ),
    "batch.size.max": FactSpec(FactUnit.COUNT, columns("requests", "batch_size"), "largest batch seen"),
    "batch.fill_ratio": FactSpec(
        FactUnit.RATIO, columns("requests", "batch_size"), "median batch size / largest seen"
    ),
    "batch.curve": FactSpec(
        FactUnit.NAME, _BATCH, "GPU throughput (items/s) and forward time per batch size"
    ),
    "batch.knee_size": FactSpec(
        FactUnit.COUNT, _BATCH, "smallest batch reaching 90 % of the best throughput"
    ),
    "batch.knee_items_per_s": FactSpec(FactUnit.RPS, _BATCH, "throughput at that batch size"),
    "batch.capacity_items_per_s": FactSpec(FactUnit.RPS, _BATCH, "best throughput at any batch size"),
    "batch.share_oversized": FactSpec(
        FactUnit.RATIO, _BATCH, "requests in batches of at least twice the knee"
    ),
    "batch.throughput_gain_past_knee": FactSpec(
        FactUnit.RATIO, _BATCH, "best throughput at twice the knee or more / at the knee, minus 1"
    ),
    "batch.forward_cost_past_knee": FactSpec(
        FactUnit.FACTOR, _BATCH, "median forward time of those batches / at the knee"
    ),
    "profiler.sessions": FactSpec(FactUnit.COUNT, _PROFILER, "profiler sessions started"),
    "profiler.active_share": FactSpec(
        FactUnit.RATIO, every(_PROFILER, _REQ), "requests served while profiling"
    ),
    "profiler.latency_cost": FactSpec(
        FactUnit.FACTOR, every(_PROFILER, _REQ), "median latency profiling / not"
    ),
    "profiler.step_p_value": FactSpec(
        FactUnit.P,
        said("events: profiler_start, and requests over two minutes around it", every(_PROFILER, _LATENCY)),
        "share of the dump's moments with a latency step as large as the one at the start",
    ),
    "profiler.forward_cost": FactSpec(
        FactUnit.FACTOR,
        every(_PROFILER, columns("requests", "stage_forward_ms")),
        "median forward time profiling / not",
    ),
    "ttft.p50_ms": FactSpec(FactUnit.MS, _GENERATION, "P50 of the time to first token"),
    "ttft.p95_ms": FactSpec(FactUnit.MS, _GENERATION, "P95 of the time to first token"),
    "ttft.p99_ms": FactSpec(FactUnit.MS, _GENERATION, "P99 of the time to first token"),
    "tpot.p50_ms": FactSpec(FactUnit.MS, _TPOT, "P50 of the time per output token"),
    "tpot.p95_ms": FactSpec(FactUnit.MS, _TPOT, "P95 of the time per output token"),
    "tpot.p99_ms": FactSpec(FactUnit.MS, _TPOT, "P99 of the time per output token"),
    "engine.kv_usage.max_pct": FactSpec(FactUnit.PCT, _KV, "the highest KV-cache usage the engine reported"),
    "engine.kv_usage.p50_pct": FactSpec(FactUnit.PCT, _KV, "the median KV-cache usage"),
    "engine.kv_full_share": FactSpec(
        FactUnit.RATIO, _KV, "share of the engine's samples with the KV cache >= 95 % full"
    ),
    "engine.queued_while_full_share": FactSpec(
        FactUnit.RATIO,
        said(
            "server: kv_cache_usage_pct (an engine's stats log or /metrics) and queue_depth",
            columns("server", "kv_cache_usage_pct", "queue_depth"),
        ),
        "share of samples with requests waiting while the KV cache was >= 90 %",
    ),
    "engine.saturated_share": FactSpec(
        FactUnit.RATIO,
        columns("server", "queue_depth", "running"),
        "share of samples with requests waiting while running was at 90 % of its highest or more",
    ),
    "engine.rho.max": FactSpec(
        FactUnit.RATIO,
        columns("server", "running"),
        "the engine's load in its busiest twentieth of the time: requests running over the most it ran",
    ),
    "engine.backlog_run_s": FactSpec(
        FactUnit.S,
        columns("server", "queue_depth", "running"),
        "longest unbroken time with requests waiting while running was at 90 % of its highest or more",
    ),
    "engine.waiting.max": FactSpec(
        FactUnit.COUNT, columns("server", "queue_depth"), "most requests waiting in the engine's queue"
    ),
    "engine.running.max": FactSpec(
        FactUnit.COUNT, columns("server", "running"), "most requests running at once"
    ),
    "engine.swapped.max": FactSpec(
        FactUnit.COUNT,
        columns("server", "swapped", where="vLLM V0"),
        "most requests swapped out to CPU memory",
    ),
    "engine.preemptions": FactSpec(
        FactUnit.COUNT,
        _ENGINE,
        "requests preempted or retracted that the evidence shows (vLLM's warnings or cumulative count, "
        "SGLang's retractions, or the counter)",
    ),
    "engine.decode_paused_s": FactSpec(
        FactUnit.S,
        columns("server", "running", "tokens_per_s", "prompt_tokens_per_s"),
        "longest time the engine prefilled and ran no decode step (fewer tokens than requests running)",
    ),
    "engine.no_progress_s": FactSpec(
        FactUnit.S,
        columns("server", "running", "tokens_per_s"),
        "longest time with requests in the engine (running or waiting) all through and no token generated "
        "or prefilled",
    ),
    "requests.stream_silence_s": FactSpec(
        FactUnit.S,
        _STREAMS,
        "longest time requests were in flight and none received a token (each known to be waiting then)",
    ),
    "requests.stream_silence_requests": FactSpec(
        FactUnit.COUNT, _STREAMS, "most requests in flight during it"
    ),
    "requests.stream_silence_start": FactSpec(FactUnit.TIME, _STREAMS, "when that silence began"),
    "engine.stalls": FactSpec(
        FactUnit.COUNT, _ENGINE, "engine steps that timed out ('Engine iteration timed out')"
    ),
    "engine.deaths": FactSpec(
        FactUnit.COUNT, _ENGINE, "times the engine died or failed (engine_dead events)"
    ),
    "engine.stall_line": FactSpec(FactUnit.NAME, event("engine_stall"), "the first stalled step's log line"),
    "engine.waited_s": FactSpec(
        FactUnit.S,
        _ENGINE,
        "seconds workers said they waited for work or a peer, added up (vLLM's 'No available shared memory "
        "broadcast block found in 60 seconds', each line a minute)",
    ),
    "engine.wait_line": FactSpec(
        FactUnit.NAME, event("engine_wait"), "the first line in which a worker said it waited"
    ),
    "engine.cache_full_statements": FactSpec(
        FactUnit.COUNT,
        _ENGINE,
        "lines in which the engine said its KV cache had no room for a request (kv_cache_full events: "
        "TGI's 'out of available cache blocks', llama.cpp's 'failed to find free space in the KV cache')",
    ),
    "engine.cache_full_line": FactSpec(
        FactUnit.NAME, event("kv_cache_full"), "the first line in which the engine said its KV cache was full"
    ),
    "engine.queue_full_statements": FactSpec(
        FactUnit.COUNT,
        _ENGINE,
        "lines in which the server said it refused or dropped a request at its queue or concurrency limit "
        "(queue_full events: Ray Serve's backpressure, Triton's 'Exceeds maximum queue size')",
    ),
    "engine.queue_full_line": FactSpec(
        FactUnit.NAME, event("queue_full"), "the first line in which the server said its queue was full"
    ),
    "engine.kv_capacity_tokens": FactSpec(
        FactUnit.COUNT, event("kv_cache_config", where="start-up log"), "tokens the KV cache holds"
    ),
    "engine.max_concurrency": FactSpec(
        FactUnit.FACTOR,
        event("kv_cache_config", where="start-up log"),
        "requests of full length the KV cache holds at once",
    ),
    "output_len.rise_ratio": FactSpec(
        FactUnit.FACTOR, _OUTPUT, "median generated length after the shift / before"
    ),
    "output_len.explained_share": FactSpec(
        FactUnit.RATIO, _OUTPUT, "share of the latency rise a latency-vs-answer-length line predicts"
    ),
    "ttft.rise_ratio": FactSpec(FactUnit.FACTOR, _TTFT, "median TTFT after its largest shift / before"),
    "ttft.input_rise_ratio": FactSpec(FactUnit.FACTOR, _TTFT_INPUT, "median prompt length after / before"),
    "ttft.unexplained_ratio": FactSpec(
        FactUnit.FACTOR, _TTFT_INPUT, "TTFT after the shift / what a TTFT-vs-prompt line predicts"
    ),
    "ttft.input_explained_share": FactSpec(
        FactUnit.RATIO, _TTFT_INPUT, "share of the TTFT rise the new prompt lengths predict"
    ),
    "tpot.rise_ratio": FactSpec(
        FactUnit.FACTOR,
        _TPOT,
        "median TPOT after its largest shift / before",
    ),
    "llm.long_prompt_tokens": FactSpec(
        FactUnit.COUNT, _LONG, "the prompt length counted as long (4x the median)"
    ),
    "tpot.during_long_prefill_p50_ms": FactSpec(
        FactUnit.MS, _LONG, "median TPOT of requests generating while a long prompt was prefilled"
    ),
    "tpot.clear_p50_ms": FactSpec(FactUnit.MS, _LONG, "median TPOT of requests generating while none was"),
    "tpot.long_prefill_ratio": FactSpec(
        FactUnit.FACTOR, _LONG, "the same comparison with each TPOT relative to the median of its minute"
    ),
    "tpot.long_prefill_share": FactSpec(
        FactUnit.RATIO, _LONG, "share of requests that generated during a long prefill"
    ),
    "oom.count": FactSpec(FactUnit.COUNT, _OOM, "OOM events"),
    "oom.parsed": FactSpec(FactUnit.COUNT, _OOM, "OOM events whose message had figures"),
    "oom.kind": FactSpec(FactUnit.NAME, _OOM, "classification of the most telling OOM"),
    "oom.reason": FactSpec(FactUnit.NAME, _OOM, "the figures that decided that classification"),
    "oom.fragmentation_count": FactSpec(
        FactUnit.COUNT,
        _OOM,
        "OOMs that stranded memory would have covered, a material share (5 %) of the card",
    ),
    "oom.exhaustion_count": FactSpec(FactUnit.COUNT, _OOM, "OOMs where memory was genuinely used up"),
    "oom.requested_bytes": FactSpec(FactUnit.BYTES, _OOM, "what the failed allocation asked for"),
    "oom.total_bytes": FactSpec(FactUnit.BYTES, _OOM, "the card's capacity"),
    "oom.free_bytes": FactSpec(FactUnit.BYTES, _OOM, "free device memory at the failure"),
    "oom.reserved_unallocated_bytes": FactSpec(FactUnit.BYTES, _OOM, "reserved by PyTorch but unallocated"),
    "oom.stranded_over_request": FactSpec(FactUnit.FACTOR, _OOM, "reserved-but-unallocated / requested"),
    "oom.stranded_card_share": FactSpec(
        FactUnit.RATIO,
        _OOM,
        "reserved-but-unallocated / the card's capacity (PyTorch's reserve where not stated)",
    ),
    "oom.other_processes_bytes": FactSpec(FactUnit.BYTES, _OOM, "memory held by other processes"),
    "trace.kernels": FactSpec(FactUnit.COUNT, _KERNELS, "kernels on the GPU with the most kernel time"),
    "trace.span_ms": FactSpec(
        FactUnit.MS, _KERNELS, "from its first kernel's start to its last kernel's end"
    ),
    "trace.kernel_median_us": FactSpec(FactUnit.US, _KERNELS, "median kernel duration"),
    "trace.short_kernel_share": FactSpec(FactUnit.RATIO, _KERNELS, "share of kernels shorter than 10 µs"),
    "trace.gpu_busy_share": FactSpec(FactUnit.RATIO, _KERNELS, "share of the span with a kernel running"),
    "trace.elementwise_share": FactSpec(
        FactUnit.RATIO, _KERNELS, "share of kernels that are elementwise (fusion candidates), by name"
    ),
    "trace.matmul_share": FactSpec(
        FactUnit.RATIO, _KERNELS, "share of kernel time in GEMM, attention and convolution"
    ),
    "trace.communication_share": FactSpec(
        FactUnit.RATIO, _KERNELS, "kernel time in collectives (NCCL, RCCL)"
    ),
    "trace.top_kernel.name": FactSpec(FactUnit.NAME, _KERNELS, "the kernel with the most time"),
    "trace.top_kernel.share": FactSpec(FactUnit.RATIO, _KERNELS, "its share of kernel time"),
    "trace.device_over_host_share": FactSpec(
        FactUnit.RATIO,
        said("a profiler summary (key_averages table, nsys stats)", table("op_summary")),
        "kernel time over the host's traced self time: on a one-thread host, the most the GPU was busy",
    ),
    "trace.operator_calls": FactSpec(
        FactUnit.COUNT,
        _TRACE,
        "framework operators the trace recorded (none in an nsys capture without NVTX)",
    ),
    "trace.ops_per_step": FactSpec(
        FactUnit.COUNT, _CPU_GRAPH, "operators a step runs on the host, outermost only (median over steps)"
    ),
    "trace.op_median_us": FactSpec(FactUnit.US, _CPU_GRAPH, "median operator time"),
    "trace.host_chain_share": FactSpec(
        FactUnit.RATIO,
        _CPU_GRAPH,
        "operator time in runs of three or more elementwise or reduction operators",
    ),
    "trace.kernel_chain_share": FactSpec(
        FactUnit.RATIO,
        _KERNELS,
        "kernel time in runs of three or more elementwise or reduction kernels in a row",
    ),
    "trace.launches": FactSpec(FactUnit.COUNT, _TRACE, "runtime calls that launch a kernel or a graph"),
    "trace.launch_median_us": FactSpec(FactUnit.US, _TRACE, "median time the host spent in one launch call"),
    "trace.graph_kernel_share": FactSpec(FactUnit.RATIO, _TRACE, "share of kernels launched by a CUDA graph"),
    "trace.idle_queued_share": FactSpec(
        FactUnit.RATIO,
        _TRACE,
        "share of the GPU's idle time with its next kernel already issued: waiting on something else "
        "than the host (another stream's event, a copy, a collective's peers, another process)",
    ),
    "trace.idle_turnaround_share": FactSpec(
        FactUnit.RATIO,
        _TRACE,
        "share of the GPU's idle time in gaps of under 10 µs between a kernel and the next, already "
        "issued: the GPU turning from one kernel to the next",
    ),
    "trace.queued_copy_share": FactSpec(
        FactUnit.RATIO,
        _TRACE,
        "of the GPU's idle time with its next kernel queued, the share a copy or memset ran meanwhile",
    ),
    "trace.queued_idle_share": FactSpec(
        FactUnit.RATIO, _TRACE, "GPU idle with its next kernel already issued, over the span"
    ),
    "trace.queue_wait_median_us": FactSpec(
        FactUnit.US,
        _TRACE,
        "median time from a kernel's launch call returning to its start: how far the host runs ahead",
    ),
    "trace.idle_sync_share": FactSpec(
        FactUnit.RATIO, _TRACE, "share of the GPU's idle time with the host blocked in a synchronising call"
    ),
    "trace.idle_launch_share": FactSpec(
        FactUnit.RATIO, _TRACE, "share of the GPU's idle time with the host in a launch call"
    ),
    "trace.idle_runtime_share": FactSpec(
        FactUnit.RATIO,
        _TRACE,
        "share of the GPU's idle time with the host in other runtime calls (allocation, queries)",
    ),
    "trace.idle_operator_share": FactSpec(
        FactUnit.RATIO,
        _TRACE,
        "share of the GPU's idle time with the host in operators, outside runtime calls",
    ),
    "trace.idle_cpu_share": FactSpec(
        FactUnit.RATIO,
        _TRACE,
        "share of the GPU's idle time with the host in operators that give the GPU no work (CPU work)",
    ),
    "trace.cpu_work_idle_share": FactSpec(
        FactUnit.RATIO, _TRACE, "GPU idle with the host in operators that give the GPU no work, over the span"
    ),
    "trace.idle_host_overhead_share": FactSpec(
        FactUnit.RATIO,
        _TRACE,
        "share of the GPU's idle time with the host in runtime calls (not syncs) or operators",
    ),
    "trace.launch_bound_idle_share": FactSpec(
        FactUnit.RATIO,
        _TRACE,
        "GPU idle with the host in runtime calls (not syncs) or operators, over the span",
    ),
    "trace.blocked_idle_share": FactSpec(
        FactUnit.RATIO,
        _TRACE,
        "GPU idle with the host blocked in a sync or copy and issuing nothing, over the span",
    ),
    "trace.idle_untraced_share": FactSpec(
        FactUnit.RATIO, _TRACE, "share of the GPU's idle time with the host in nothing the trace recorded"
    ),
    "trace.sync_calls": FactSpec(
        FactUnit.COUNT, _TRACE, "synchronising runtime calls (synchronise, blocking copy)"
    ),
    "trace.sync_idle_share": FactSpec(
        FactUnit.RATIO,
        _TRACE,
        "GPU idle right after synchronising calls returned (up to the wait in each), over the span",
    ),
    "trace.steps": FactSpec(FactUnit.COUNT, _STEPS, "profiled steps"),
    "trace.step_median_ms": FactSpec(
        FactUnit.MS, _STEPS, "median step time on the host (its ProfilerStep annotation)"
    ),
    "trace.gpu_step_ms": FactSpec(
        FactUnit.MS, _STEPS, "median step time on the GPU: from a step's first kernel to the next step's"
    ),
    "trace.step_cv": FactSpec(FactUnit.RATIO, _STEPS, "step time's standard deviation over its mean"),
    "trace.step_busy_share.p50": FactSpec(
        FactUnit.RATIO, _STEPS, "the GPU's busy share within a step (first kernel to the next step's), median"
    ),
    "trace.step_busy_share.min": FactSpec(FactUnit.RATIO, _STEPS, "the same in the least busy step"),
    "trace.kernels_per_step": FactSpec(FactUnit.COUNT, _STEPS, "kernels launched per step (median)"),
    "trace.sync_per_step": FactSpec(FactUnit.FACTOR, _STEPS, "synchronising calls per step"),
    "trace.copies": FactSpec(FactUnit.COUNT, _COPIES, "copies on the GPU analysed"),
    "trace.pageable_copies": FactSpec(
        FactUnit.COUNT, _COPIES, "host-device copies from or to pageable memory"
    ),
    "trace.pageable_copy_bytes": FactSpec(FactUnit.BYTES, _COPIES, "bytes those copies moved"),
    "trace.pageable_copy_share": FactSpec(FactUnit.RATIO, _COPIES, "their time over the kernel span"),
    "trace.pageable_host_copy_share": FactSpec(
        FactUnit.RATIO, _COPIES, "share of host-device copies that are pageable"
    ),
    # Over-parallelism (facts/parallelism.py)
    "host.run_queue_per_core.p50": FactSpec(
        FactUnit.NUMBER, _RUNQ, "threads running or waiting to run per core, median over the samples"
    ),
    "host.cpu_system_share": FactSpec(
        FactUnit.RATIO,
        columns("system", "cpu_system_pct", "cpu_pct"),
        "share of the host's busy CPU spent in the kernel",
    ),
    "host.server_cpu_share": FactSpec(
        FactUnit.RATIO,
        said(
            "processes: the server's rows (cpu_pct, num_threads; cores_allowed), system: cpu_pct",
            every(_SERVER_ROWS, columns("system", "cpu_pct")),
        ),
        "the server's share of the host's busy CPU",
    ),
    "server.cores": FactSpec(
        FactUnit.NUMBER, _SERVER, "cores the server may use (its affinity and CPU quota)"
    ),
    "server.process": FactSpec(
        FactUnit.NAME, _SERVER, "the server's processes (one or more), as the report names them"
    ),
    "server.processes": FactSpec(FactUnit.COUNT, _SERVER, "the server's processes at once (workers)"),
    "server.threads_follow_requests": FactSpec(
        FactUnit.RATIO,
        _THREADS_HELD,
        "Spearman correlation of the server's thread count with the requests it holds (waiting and running)",
    ),
    "server.threads.p5": FactSpec(FactUnit.COUNT, _THREADS_HELD, "the server's threads, 5th percentile"),
    "server.threads.p95": FactSpec(FactUnit.COUNT, _THREADS_HELD, "the server's threads, 95th percentile"),
    "server.threads_per_core": FactSpec(FactUnit.NUMBER, _SERVER, "the server's threads per core it may use"),
    "server.core_share.p50": FactSpec(
        FactUnit.RATIO, _SERVER, "the server's CPU over the cores it may use, median (1 = all of them)"
    ),
    "server.involuntary_switch_share": FactSpec(
        FactUnit.RATIO,
        _SWITCHES,
        "share of the server's threads' context switches that were forced (preempted)",
    ),
    "server.involuntary_switches_per_core_s.p50": FactSpec(
        FactUnit.NUMBER, _SWITCHES, "the server's forced context switches a second per core, median"
    ),
    "server.pool_threads": FactSpec(
        FactUnit.COUNT,
        _POOL,
        "the intra-op pool size the server declares",
    ),
    "server.pool_threads_per_core": FactSpec(
        FactUnit.NUMBER,
        _POOL,
        "that pool times the server's processes, per core it may use",
    ),
    "server.run_queue_wait_per_core.p50": FactSpec(
        FactUnit.RATIO,
        said(
            "processes: run_queue_wait_pct (diagnose record) of the server",
            columns("processes", "run_queue_wait_pct"),
        ),
        "the server's threads' time runnable but waiting for a core, per core it may use, median",
    ),
    # Memory cleaned up after every request (facts/memory_cleanup.py)
    "allocator.device_allocs": FactSpec(FactUnit.COUNT, _DEVICE_ALLOCS, "device allocations during the dump"),
    "allocator.alloc_growth_share": FactSpec(
        FactUnit.RATIO, every(_DEVICE_ALLOCS, _REQ), "sampling intervals with requests in which they grew"
    ),
    "allocator.device_allocs_per_request": FactSpec(
        FactUnit.NUMBER, every(_DEVICE_ALLOCS, _REQ), "device allocations per request over the same time"
    ),
    "allocator.cached_share.p50": FactSpec(
        FactUnit.RATIO,
        columns("allocator", "reserved_bytes", "allocated_bytes"),
        "median share of reserved memory held as cache",
    ),
    "server.minor_faults_per_request.p50": FactSpec(
        FactUnit.NUMBER,
        said(
            f"{_FAULTS} of the server, and requests", every(columns("processes", "minor_faults_per_s"), _REQ)
        ),
        "the server's minor page faults per request, median over the sampling intervals",
    ),
    "server.faulted_bytes": FactSpec(
        FactUnit.BYTES,
        said(f"{_FAULTS} of the server", columns("processes", "minor_faults_per_s")),
        "memory faulted in, 4 KiB pages",
    ),
    "server.fault_recycling": FactSpec(
        FactUnit.FACTOR,
        said(f"{_FAULTS}, rss_bytes of the server", columns("processes", "minor_faults_per_s", "rss_bytes")),
        "memory faulted in over the range its resident memory moved in: times the same memory was retaken",
    ),
    "trace.data_loading_share": FactSpec(
        FactUnit.RATIO,
        said(
            "a profile with PyTorch DataLoader spans (enumerate(DataLoader)#...__next__)",
            either(columns("host_calls", "name", "dur_us"), columns("op_summary", "name", "host_total_us")),
        ),
        "share of the profiled host time spent fetching the next batch from a DataLoader",
    ),
    "trace.device_alloc_calls": FactSpec(FactUnit.COUNT, _TRACE, "cudaMalloc / cudaFree calls in the trace"),
    "trace.device_alloc_share": FactSpec(FactUnit.RATIO, _TRACE, "time in them over the host calls' span"),
    "trace.free_step_share": FactSpec(FactUnit.RATIO, _STEPS, "share of profiler steps with a cudaFree"),
}

# What `diagnose verify` reads on the live host, by probe (diagnose/verify/probes.py): a rule's checks
# name these beside the dump's facts. Never in a dump, so kept apart from CATALOGUE.
_SCHEDULES = probe(
    "schedules",
    "the host's schedules: crontabs (/etc/crontab, /etc/cron.d, the users' spools), systemd timers",
)
_NVML_NOW = probe("gpu_clocks", "NVML on this host, now (nvidia-ml-py)")
_METRICS_NOW = probe(
    "engine_metrics", "the engine's /metrics now (the dump's metrics source, or verify --metrics-url)"
)
_PROC_NOW = probe(
    "processes_now",
    "/proc on this host, read every second for ten: the dump's server (its pid, else its name and "
    "command line)",
)
_STACKS_NOW = probe(
    "stacks", "py-spy dump --nonblocking of the dump's server, ten dumps half a second apart (when installed)"
)
_HOST_NOW = probe("processes_now", "/proc on this host, read every second for ten (stat, vmstat, meminfo)")
LIVE: dict[str, FactSpec] = {
    "live.schedules.count": FactSpec(FactUnit.COUNT, _SCHEDULES, "scheduled jobs found on the host"),
    "live.schedules.period_match": FactSpec(
        FactUnit.BOOL, _SCHEDULES, "a scheduled job runs at the contending process's period (within 15 %)"
    ),
    "live.schedules.command_match": FactSpec(
        FactUnit.BOOL, _SCHEDULES, "a scheduled job runs the contending process's command"
    ),
    "live.schedules.match": FactSpec(FactUnit.NAME, _SCHEDULES, "the scheduled job that matches, as written"),
    "live.gpu.busy_now": FactSpec(
        FactUnit.BOOL, _NVML_NOW, "a GPU is working (utilisation of 10 % or more) now"
    ),
    "live.gpu.slowing_now": FactSpec(FactUnit.BOOL, _NVML_NOW, "a working GPU reports a slowing reason"),
    "live.gpu.reason": FactSpec(FactUnit.NAME, _NVML_NOW, "the slowing reason a working GPU reports"),
    "live.gpu.clock_ratio": FactSpec(
        FactUnit.RATIO, _NVML_NOW, "a working GPU's lowest SM clock over its maximum"
    ),
    "live.engine.preemptions_total": FactSpec(
        FactUnit.COUNT, _METRICS_NOW, "its preemptions since it started"
    ),
    "live.engine.kv_usage_pct": FactSpec(FactUnit.PCT, _METRICS_NOW, "the KV cache in use now"),
    "live.engine.waiting": FactSpec(FactUnit.COUNT, _METRICS_NOW, "requests waiting now"),
    "live.engine.running": FactSpec(FactUnit.COUNT, _METRICS_NOW, "requests running now"),
    "live.engine.tokens_per_s": FactSpec(
        FactUnit.NUMBER, _METRICS_NOW, "tokens generated a second, over five seconds"
    ),
    "live.engine.prompt_tokens_per_s": FactSpec(
        FactUnit.NUMBER, _METRICS_NOW, "prompt tokens prefilled a second, over five seconds"
    ),
    "live.engine.waiting_growth": FactSpec(
        FactUnit.NUMBER, _METRICS_NOW, "requests waiting now, less those waiting five seconds before"
    ),
    "live.stacks.active_samples": FactSpec(
        FactUnit.COUNT, _STACKS_NOW, "threads py-spy found active, over its dumps"
    ),
    "live.stacks.top_frame": FactSpec(FactUnit.NAME, _STACKS_NOW, "the function most often running in them"),
    "live.stacks.stage": FactSpec(
        FactUnit.NAME, _STACKS_NOW, "the CPU stage looked for (the dump's cpu_stage.name)"
    ),
    "live.stacks.stage_share": FactSpec(
        FactUnit.RATIO,
        _STACKS_NOW,
        "active samples whose frames name the stage (its words, in functions or files)",
    ),
    "live.server.found": FactSpec(FactUnit.BOOL, _PROC_NOW, "the dump's server runs now"),
    "live.server.process": FactSpec(FactUnit.NAME, _PROC_NOW, "its process ids and name now"),
    "live.server.cpu_pct": FactSpec(FactUnit.PCT, _PROC_NOW, "its CPU now, in % of a core"),
    "live.server.busiest_thread_pct": FactSpec(
        FactUnit.PCT, _PROC_NOW, "its busiest thread's CPU in its busiest second, % of a core"
    ),
    "live.server.main_thread_pct": FactSpec(
        FactUnit.PCT,
        _PROC_NOW,
        "its main thread (an async server's event loop) in its busiest second, % of a core",
    ),
    "live.server.threads": FactSpec(FactUnit.COUNT, _PROC_NOW, "its threads now"),
    "live.server.involuntary_share": FactSpec(
        FactUnit.RATIO, _PROC_NOW, "its threads' context switches that were forced (preempted), not chosen"
    ),
    "live.server.minor_faults_per_s": FactSpec(FactUnit.NUMBER, _PROC_NOW, "pages it faults in a second now"),
    "live.server.age_s": FactSpec(FactUnit.S, _PROC_NOW, "how long it has run (its oldest process)"),
    "live.server.started_in_dump": FactSpec(
        FactUnit.BOOL,
        _PROC_NOW,
        "it started within the dump (after its first sample): it was (re)started in it",
    ),
    "live.host.run_queue_per_core": FactSpec(
        FactUnit.RATIO, _HOST_NOW, "threads running or runnable per core now (median of the reads)"
    ),
    "live.host.swap_traffic_per_s": FactSpec(FactUnit.BYTES, _HOST_NOW, "swap in and out a second now"),
    "live.host.swap_total_bytes": FactSpec(FactUnit.BYTES, _HOST_NOW, "swap space configured"),
    "live.other.busiest": FactSpec(
        FactUnit.NAME, _PROC_NOW, "the busiest process that is not the server, now"
    ),
    "live.other.busiest_pct": FactSpec(FactUnit.PCT, _PROC_NOW, "its CPU now, in % of a core"),
    "live.other.contender_pct": FactSpec(
        FactUnit.PCT, _PROC_NOW, "CPU now of the processes that run the dump's contending command"
    ),
}
# Each probe and the live facts it gives.
PROBES: dict[str, tuple[str, ...]] = {
    probe: tuple(name for name in LIVE if name.split(".")[1] in keys)
    for probe, keys in (
        ("schedules", ("schedules",)),
        ("gpu_clocks", ("gpu",)),
        ("engine_metrics", ("engine",)),
        ("processes_now", ("server", "host", "other")),
        ("stacks", ("stacks",)),
    )
}
