"""The stable root-cause ids of dump format version 1 (reports and users rely on them)."""

ROOT_CAUSE_IDS: dict[str, str] = {
    "co-located-contention": "periodic latency spikes aligned with another process on the same host",
    "cpu-bound-stage": "a CPU-side stage dominates or starves the GPU; GPU utilisation low",
    "memory-fragmentation": "OOM or allocation retries while total free memory is ample",
    "cold-start-contamination": "slow requests right after a (re)start dominate the tail",
    "queue-saturation": "utilisation near 1; queue wait grows like rho/(1-rho); no headroom",
    "batch-window-too-long": "batch waiting, not compute, drives latency up with GPU utilisation",
    "oversized-batch": "larger batches no longer raise throughput but raise latency",
    "input-length-shift": "latency rose because inputs got longer, not because the system slowed",
    "memory-swapping": "memory pressure makes the system page/swap; throughput collapses",
    "gpu-throttling": "clocks held down by power, thermal or other throttle reasons",
    "profiler-overhead": "a profiler or heavy tracing left on in serving",
    "compute-bound-forward": "model forward dominates (>80%) the latency",
    "kv-cache-pressure": "LLM serving: the KV cache is full; requests are preempted and wait",
    "prefill-decode-interference": "LLM serving: time per output token spikes when long prompts prefill",
    "engine-stall": "the serving engine stops making progress: steps time out, the engine dies",
    "coarse-sampling": "the evidence is too coarse to see spikes; a data-quality finding",
    "unfused-operators": "from a trace: many small operators run one by one; fusion did not take effect",
    "host-sync-in-step": "from a trace: the step blocks on the GPU, which idles while the host catches up",
    "pageable-host-copies": "from a trace: host-device copies from pageable memory, synchronous and slow",
    "gpu-waits-on-dependency": (
        "from a trace: the GPU idles with its next kernels queued; it waits on something, not the host"
    ),
    "memory-cleanup-per-request": "the allocator's cache is emptied after every inference",
    "over-parallelism": "more threads or parallel sub-tasks than cores; contention, not throughput",
}
