"""Open-loop load from real arrivals and lengths: the Azure LLM inference trace, replayed at a chosen rate.

Arrival gaps and prompt/answer lengths come from
``../shared/data/azure-llm-inference-2023/`` (the conversation trace, or the
code trace) when it is there, else from a 70/20/10 short/medium/long mix with
Poisson arrivals. Requests are sent at their times whether or not earlier ones
have been answered (open loop: a slow server meets the same traffic, as in
production), on loopback only, bounded in time and in requests outstanding.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np
import pandas as pd

TRACE_DIR = Path(__file__).resolve().parents[2] / "shared" / "data" / "azure-llm-inference-2023"
TRACES = {"conv": "AzureLLMInferenceTrace_conv.csv", "code": "AzureLLMInferenceTrace_code.csv"}
LENGTH_SCALE = 0.25  # the trace's prompts, scaled to what a CPU model answers in milliseconds
MAX_PROMPT_TOKENS = 4_096
TOKENS_PER_WORD = 2.8  # of the prompt words below, measured with the testbed's tokenizer
WORDS_PER_LINE = 12
MAX_OUTSTANDING = 1_000
LOCAL_GAPS = 301


@dataclass(frozen=True)
class Request:
    at_s: float  # seconds after the start of the load
    prompt_tokens: int
    max_tokens: int


@dataclass(frozen=True)
class LoadPlan:
    """``rate_rps`` at the start, moving linearly to ``ramp_to_rps`` (if given) by the end;
    prompt lengths multiplied by ``length_factor`` from ``shift_at_s`` on."""

    duration_s: float
    rate_rps: float
    ramp_to_rps: float | None = None
    shift_at_s: float | None = None
    length_factor: float = 1.0
    trace: str = "conv"
    seed: int = 0

    def rate_at(self, t: float) -> float:
        if self.ramp_to_rps is None:
            return self.rate_rps
        return self.rate_rps + (self.ramp_to_rps - self.rate_rps) * min(t / self.duration_s, 1.0)


def schedule(plan: LoadPlan, trace_dir: Path = TRACE_DIR) -> list[Request]:
    """Every request of the plan, in time order."""
    gaps, prompts, answers = _source(plan, trace_dir)
    rng = np.random.default_rng(plan.seed)
    offset = int(rng.integers(len(gaps)))
    # The trace's burstiness within a minute or so, without its slower swings: the plan sets the rate.
    local = pd.Series(gaps).rolling(LOCAL_GAPS, center=True, min_periods=1).mean().to_numpy()
    requests, t, i = [], 0.0, 0
    while True:
        k = (offset + i) % len(gaps)
        t += gaps[k] / local[k] / plan.rate_at(t)
        if t >= plan.duration_s:
            return requests
        # Lengths drawn from the whole trace, not in its order: in order, its length mix drifts over
        # minutes (P95 prompt 1.6x within one run), a shift no scenario asked for; the plan sets the mix.
        j = int(rng.integers(len(prompts)))
        factor = plan.length_factor if plan.shift_at_s is not None and t >= plan.shift_at_s else 1.0
        tokens = int(min(max(8, prompts[j] * LENGTH_SCALE * factor), MAX_PROMPT_TOKENS))
        requests.append(Request(t, tokens, int(max(1, answers[j]))))
        i += 1


def _source(plan: LoadPlan, trace_dir: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    path = trace_dir / TRACES[plan.trace]
    if path.is_file():
        table = pd.read_csv(path)
        ts = pd.to_datetime(table["TIMESTAMP"]).astype("int64").to_numpy() / 1e9
        gaps = np.diff(ts)
        gaps = np.where(gaps > 0, gaps, np.median(gaps[gaps > 0]))
        return gaps, table["ContextTokens"].to_numpy()[1:], table["GeneratedTokens"].to_numpy()[1:]
    rng = np.random.default_rng(plan.seed + 1)
    n = 20_000
    kind = rng.choice(3, size=n, p=[0.7, 0.2, 0.1])
    low, high = np.array([100, 800, 3_000])[kind], np.array([800, 3_000, 8_000])[kind]
    prompts = np.exp(rng.uniform(np.log(low), np.log(high)))
    return rng.exponential(1.0, n), prompts, rng.integers(8, 400, n)


class PromptMaker:
    """Prompt text of about a given number of tokens, cut from a fixed word list at random places."""

    def __init__(self, words: list[str], seed: int = 0, tokens_per_word: float = TOKENS_PER_WORD) -> None:
        self._words = words
        self._rng = np.random.default_rng(seed)
        self._tokens_per_word = tokens_per_word  # of the tokenizer that will read the prompts

    def make(self, tokens: int) -> str:
        count = max(1, int(tokens / self._tokens_per_word))
        start = int(self._rng.integers(max(1, len(self._words) - count)))
        chosen = (self._words * (1 + count // max(1, len(self._words))))[start : start + count]
        lines = [" ".join(chosen[i : i + WORDS_PER_LINE]) for i in range(0, len(chosen), WORDS_PER_LINE)]
        return "\n".join(lines)


# How one request is sent and counted: the client, its prompt text, the planned request, its number, the
# counts to keep.
Send = Callable[[httpx.AsyncClient, str, "Request", int, "LoadResult"], Awaitable[None]]

# How one request of a capacity measurement is sent: True when it was answered.
Complete = Callable[[httpx.AsyncClient, str, "Request"], Awaitable[bool]]


@dataclass
class LoadResult:
    sent: int = 0
    ok: int = 0
    failed: int = 0
    skipped: int = 0  # not sent: MAX_OUTSTANDING were already waiting
    latencies_ms: list[float] = field(default_factory=list)

    def summary(self) -> str:
        lat = np.array(self.latencies_ms) if self.latencies_ms else np.array([np.nan])
        p50, p99 = np.nanpercentile(lat, [50, 99]) if self.latencies_ms else (float("nan"), float("nan"))
        return (
            f"sent {self.sent}, ok {self.ok}, failed {self.failed}, not sent {self.skipped}; "
            f"client latency p50 {p50:.1f} ms, p99 {p99:.1f} ms"
        )


async def drive(
    base_url: str,
    requests: list[Request],
    prompts: PromptMaker,
    stop: Callable[[], bool] = lambda: False,
    timeout_s: float = 30.0,
    result: LoadResult | None = None,
    send: Send | None = None,
) -> LoadResult:
    """Send each request at its time; return when all are answered, failed or timed out. ``result``:
    the counts to keep, read meanwhile by whoever shows the run's progress; ``send``: how one request
    is sent and counted (default: the testbed service's ``POST /generate``)."""
    send = send or _send
    result = result if result is not None else LoadResult()
    outstanding: set[asyncio.Task] = set()
    limits = httpx.Limits(max_connections=MAX_OUTSTANDING, max_keepalive_connections=64)
    async with httpx.AsyncClient(base_url=base_url, timeout=timeout_s, limits=limits) as client:
        start = time.monotonic()
        for number, request in enumerate(requests):
            delay = request.at_s - (time.monotonic() - start)
            if delay > 0:
                await asyncio.sleep(delay)
            if stop():
                break
            if len(outstanding) >= MAX_OUTSTANDING:
                result.skipped += 1
                continue
            task = asyncio.create_task(
                send(client, prompts.make(request.prompt_tokens), request, number, result)
            )
            outstanding.add(task)
            task.add_done_callback(outstanding.discard)
        if outstanding:
            await asyncio.wait(outstanding)
    return result


async def measure_capacity(
    base_url: str,
    requests: list[Request],
    prompts: PromptMaker,
    seconds: float = 6.0,
    concurrency: int = 16,
    timeout_s: float = 30.0,
    transport: httpx.AsyncBaseTransport | None = None,
    complete: Complete | None = None,
) -> float:
    """Requests per second the service completes when it is never idle: a closed loop of
    ``concurrency`` clients sending the plan's own mix for ``seconds`` (the first sixth not counted,
    while the queue fills). What "past what the service can serve" means on this machine.
    ``complete``: how one request is sent, True when it was answered (default: ``POST /generate``)."""
    complete = complete or _generated
    if not requests:
        raise ValueError("measure_capacity needs the plan's requests to draw its mix from")
    done: list[float] = []
    start = time.monotonic()
    deadline = start + seconds

    async def client_loop(client: httpx.AsyncClient, first: int) -> None:
        k = first
        while time.monotonic() < deadline:
            request = requests[k % len(requests)]
            if await complete(client, prompts.make(request.prompt_tokens), request):
                done.append(time.monotonic())
            k += concurrency

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(
        base_url=base_url, timeout=timeout_s, limits=limits, transport=transport
    ) as client:
        await asyncio.gather(*(client_loop(client, i) for i in range(concurrency)))
    counted = start + seconds / 6
    finished = [t for t in done if counted <= t <= deadline]
    if len(finished) < 2:
        raise RuntimeError(f"the service completed {len(done)} requests in {seconds:.0f} s under load")
    return len(finished) / (deadline - counted)


async def _generated(client: httpx.AsyncClient, prompt: str, request: Request) -> bool:
    response = await client.post("/generate", json={"prompt": prompt, "max_tokens": request.max_tokens})
    return response.status_code == 200


async def _send(
    client: httpx.AsyncClient, prompt: str, request: Request, number: int, result: LoadResult
) -> None:
    body = {"prompt": prompt, "max_tokens": request.max_tokens}
    result.sent += 1
    sent = time.time()
    headers = {"x-sent-at": f"{sent:.6f}", "x-request-id": str(number)}
    try:
        response = await client.post("/generate", json=body, headers=headers)
    except httpx.HTTPError:
        result.failed += 1
        return
    if response.status_code == 200:
        result.ok += 1
        result.latencies_ms.append((time.time() - sent) * 1000)
    else:
        result.failed += 1
