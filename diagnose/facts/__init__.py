"""Facts: what the evidence says, as named numbers that cite their source."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from diagnose.detect import SpikeAnalysis
from diagnose.dump.model import Dump
from diagnose.facts.batching import add_batch_facts
from diagnose.facts.coldstart import add_coldstart_facts
from diagnose.facts.cpu_graph import add_cpu_graph_facts
from diagnose.facts.data_loading import add_data_loading_facts
from diagnose.facts.engine import add_engine_facts
from diagnose.facts.gpu_trace import add_trace_facts
from diagnose.facts.host_memory import add_host_memory_facts
from diagnose.facts.latency import add_latency_facts
from diagnose.facts.length_shift import add_shift_facts
from diagnose.facts.llm import add_interference_facts, add_llm_facts, add_llm_shift_facts
from diagnose.facts.load_steps import add_load_step_facts
from diagnose.facts.memory import add_allocator_facts, add_oom_facts
from diagnose.facts.memory_cleanup import add_memory_cleanup_facts
from diagnose.facts.model import Fact, Facts, Headline
from diagnose.facts.op_summary import add_summary_facts
from diagnose.facts.parallelism import add_parallelism_facts
from diagnose.facts.profiler import add_profiler_facts
from diagnose.facts.queueing import add_queue_facts
from diagnose.facts.resources import add_gpu_facts, add_host_facts, add_thread_facts
from diagnose.facts.sampling import add_sampling_facts
from diagnose.facts.spikes import add_spike_facts
from diagnose.facts.stages import add_stage_facts, declared_kinds
from diagnose.facts.streams import add_stream_facts
from diagnose.facts.throttle import add_throttle_facts
from diagnose.isolation import isolated

__all__ = ["Fact", "Facts", "Headline", "add_spike_evidence", "compute_facts"]


def compute_facts(dump: Dump, slo_p99_ms: float | None = None, spikes: SpikeAnalysis | None = None) -> Facts:
    facts = Facts()
    _set_window(facts, dump)
    if slo_p99_ms:
        facts.summary.slo_p99_ms, facts.summary.slo_source = slo_p99_ms, "--slo-p99-ms"
    elif dump.manifest.slo_p99_ms:
        facts.summary.slo_p99_ms, facts.summary.slo_source = dump.manifest.slo_p99_ms, "manifest slo_p99_ms"
    requests = dump.table("requests")
    declared = declared_kinds(dump.manifest.extra, facts.warnings)
    steps: list[tuple[str, Callable[[], None]]] = []
    if requests is not None and len(requests):
        source = dump.source("requests")
        sample = dump.request_sample
        # A sample holds 1 in N of the requests in flight at any moment: what needs them all is not read.
        sampled = (
            None
            if sample is None
            else f"every request in flight at once ({source} is analysed on a sample of {len(requests):,} "
            f"of its {sample.total:,} requests)"
        )
        steps += [
            (f"latency facts from {source}", lambda: add_latency_facts(facts, requests, source, sample)),
            (
                f"stage facts from {source}",
                lambda: add_stage_facts(facts, requests, source, declared, sampled),
            ),
            (f"TTFT and TPOT from {source}", lambda: add_llm_facts(facts, requests, source)),
            (
                f"prefill interference from {source}",
                lambda: add_interference_facts(facts, requests, source, sampled),
            ),
            (f"stream silences from {source}", lambda: add_stream_facts(facts, requests, source, sampled)),
            (f"TTFT and TPOT shifts from {source}", lambda: add_llm_shift_facts(facts, requests, source)),
            (f"batching facts from {source}", lambda: add_batch_facts(facts, requests, source)),
            (f"input-length facts from {source}", lambda: add_shift_facts(facts, requests, source)),
            (f"cold-start facts from {source}", lambda: add_coldstart_facts(facts, dump, requests, source)),
        ]
    steps += [
        ("queueing facts", lambda: add_queue_facts(facts, dump)),  # from the engine's gauges without requests
        ("load test facts", lambda: add_load_step_facts(facts, dump)),
        ("serving-engine facts", lambda: add_engine_facts(facts, dump)),
        ("GPU facts", lambda: add_gpu_facts(facts, dump)),
        ("GPU clock facts", lambda: add_throttle_facts(facts, dump)),
        ("host CPU facts", lambda: add_host_facts(facts, dump)),
        ("host memory facts", lambda: add_host_memory_facts(facts, dump)),
        ("sampling facts", lambda: add_sampling_facts(facts, dump)),
        ("thread facts", lambda: add_thread_facts(facts, dump)),
        ("parallelism facts", lambda: add_parallelism_facts(facts, dump)),
        ("memory cleanup facts", lambda: add_memory_cleanup_facts(facts, dump)),
        ("allocator facts", lambda: add_allocator_facts(facts, dump)),
        ("OOM facts", lambda: add_oom_facts(facts, dump)),
        ("profiler facts", lambda: add_profiler_facts(facts, dump)),
        ("profiler trace facts", lambda: add_trace_facts(facts, dump)),
        ("profiler summary facts", lambda: add_summary_facts(facts, dump)),
        ("host-run graph facts", lambda: add_cpu_graph_facts(facts, dump)),
        ("data loading facts", lambda: add_data_loading_facts(facts, dump)),
    ]
    for what, step in steps:
        isolated(facts.warnings, what, step)
    if spikes is not None:
        add_spike_evidence(facts, spikes)
    return facts


def add_spike_evidence(facts: Facts, spikes: SpikeAnalysis) -> None:
    """The facts read from the spike analysis, for a pipeline that finishes it after the others."""
    isolated(facts.warnings, "spike facts", lambda: add_spike_facts(facts, spikes))


def _set_window(facts: Facts, dump: Dump) -> None:
    starts = [float(t["ts"].iloc[0]) for t in dump.tables.values() if len(t)]
    ends = [float(t["ts"].iloc[-1]) for t in dump.tables.values() if len(t)]
    if starts:
        facts.start, facts.end = float(np.min(starts)), float(np.max(ends))
