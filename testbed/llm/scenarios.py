"""Scenarios on a real text-generation engine: llama.cpp's server, its own faults, each with a healthy twin.

Loads are set as multiples of what the engine serves on this machine, measured
just before the run (a closed loop of streaming clients on the load's own mix):
a fixed rate that is healthy on one machine saturates a slower one. Times are
fractions of the run, as in testbed.scenarios.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from testbed.llm import engine

SLOTS = 4
SLOT_CONTEXT = 6_144  # the longest scaled prompt (4,096) and the longest answer of the trace (1,000) fit


@dataclass(frozen=True)
class EngineScenario:
    name: str
    cause: str | None
    summary: str
    load: float = 0.4  # the offered load at the start, as a share of the measured capacity
    ramp_to: float | None = None  # the share it rises to, linearly, by the end
    slots: int = SLOTS
    context: int = SLOTS * SLOT_CONTEXT  # the server's -c: its KV cache, shared out among the slots
    service_args: tuple[str, ...] = ()  # more llama-server options (what truth.yaml and compare see)
    stop_at: float | None = None  # fraction of the run where the server is stopped (SIGSTOP)
    # Past any step's length (no step of any model takes 30 s; vLLM's watchdog gives up at 60 s), so the
    # fault is a stall on every seed and not a long step: the streams measure a little less than the stop.
    stop_seconds: float = 45.0
    restart_at: float | None = None  # fraction of the run where the server is restarted
    job_period_s: tuple[float, float] | None = None  # a co-located CPU job, as testbed.scenarios has it
    job_seconds: tuple[float, float] = (10.0, 20.0)
    # This share of the requests, drawn from the seed, sent with a prompt this long (tokens) and a short
    # answer: long prefills landing among the others' streaming answers.
    long_prompt_share: float = 0.0
    long_prompt_tokens: int = 0
    fault_from: float = 0.0
    default_duration_s: float = 240.0
    min_duration_s: float = 0.0
    fixed_service_args: tuple[str, ...] | None = None
    fixed_context: int | None = None  # the twin's -c, where the fault is the cache's size
    benchmark_skip: str | None = None

    def without_fault(self) -> EngineScenario:
        """The same engine and load with the fault removed: the healthy twin."""
        fixed = self.fixed_service_args if self.fixed_service_args is not None else self.service_args
        return replace(
            self,
            name=f"{self.name}-fixed",
            cause=None,
            summary=f"{self.name} with its fault removed",
            ramp_to=None if self.cause == "queue-saturation" else self.ramp_to,
            service_args=fixed,
            context=self.fixed_context if self.fixed_context is not None else self.context,
            stop_at=None,
            restart_at=None,
            job_period_s=None,
            long_prompt_share=0.0,
        )

    def unavailable(self) -> str | None:
        if engine.find() is None:
            return engine.why_not_buildable()
        return None

    def server_options(self) -> list[str]:
        return ["--parallel", str(self.slots), "-c", str(self.context), *self.service_args]


ENGINE_SCENARIOS: dict[str, EngineScenario] = {
    s.name: s
    for s in (
        EngineScenario(
            "llm-healthy",
            None,
            "llama.cpp's server, four slots, streaming the Azure conversation trace at 40 % of capacity",
        ),
        EngineScenario(
            "llm-queue-saturation",
            "queue-saturation",
            "arrivals ramp from 30 % to 130 % of what the four slots serve: requests wait for a slot "
            "(the server's requests_deferred), time to first token grows without bound",
            load=0.3,
            ramp_to=1.3,
        ),
        EngineScenario(
            "llm-kv-cache-pressure",
            "kv-cache-pressure",
            "the four slots share one KV cache of 1,536 tokens (--kv-unified), a sixteenth of what they have "
            "apart: at 70 % of capacity the requests streaming at once (a median 430 tokens each, prompt "
            "and answer) outgrow it, the server halves its batch to find room ('failed to find free space "
            "in the KV cache') and, at a batch of one, fails every request in flight ('Context size has "
            "been exceeded'); a prompt longer than the whole cache is refused",
            load=0.7,
            context=1_536,
            service_args=("--kv-unified",),
            fixed_service_args=(),
            fixed_context=SLOTS * SLOT_CONTEXT,
        ),
        EngineScenario(
            "llm-engine-stall",
            "engine-stall",
            "half-way the server is stopped (SIGSTOP) for 45 s with requests streaming: no token, no "
            "/metrics answer, then it resumes",
            stop_at=0.5,
        ),
        EngineScenario(
            "llm-prefill-decode-interference",
            "prefill-decode-interference",
            "one request in twelve carries a 3,000-token prompt and a short answer: prefilled 2,048 "
            "tokens a step (llama.cpp's default batch), so every answer streaming beside it waits for "
            "steps that long",
            long_prompt_share=1 / 12,
            # Well inside a slot's 6,144 tokens: the words' cut varies a prompt's tokens by half again
            # (5,000 asked gave up to 7,808, refused), and a refused prompt interferes with nothing.
            long_prompt_tokens=3_000,
        ),
        EngineScenario(
            "llm-cold-start",
            "cold-start-contamination",
            "the server restarts half-way and loads the model again; the first requests wait for it",
            restart_at=0.5,
            fault_from=0.5,
            benchmark_skip=(
                "the tiny model loads in 40 ms and its first requests after a restart are as fast as any "
                "(seed 1: the cold requests raise P99 0.99x): a restart here costs the requests in flight "
                "(38 failed), not a cold tail, so there is no cold-start contamination to find; it needs a "
                "model that loads and warms slowly"
            ),
        ),
        EngineScenario(
            "llm-co-located-contention",
            "co-located-contention",
            "a cron-style job takes both cores and 512 MiB for 10-20 s every 90-150 s beside the engine",
            job_period_s=(90.0, 150.0),
            default_duration_s=600.0,
            min_duration_s=600.0,
        ),
        EngineScenario(
            "llm-over-parallelism",
            "over-parallelism",
            "the engine's decode and batch thread pools at eight threads a core: more threads wanting to "
            "run than cores, spinning while they wait for each other",
            service_args=("--threads", "8x", "--threads-batch", "8x"),
            fixed_service_args=(),
        ),
    )
}
