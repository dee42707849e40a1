"""Open-loop streaming load on an OpenAI-compatible completions endpoint, logged as a gateway logs it.

Each request is sent at its time (testbed.load's schedule: the Azure trace's
arrivals and lengths), streamed (``"stream": true``; llama.cpp's server sends
one token an event), and logged when it ends as one JSON line of the request
log that ``diagnose record --requests-log`` follows: arrival time, latency,
time to first token, time per output token after the first, the longest pause
between two tokens and when it began (``itl_max_ms``, ``itl_max_at_ms`` after
arrival: a mean TPOT hides a 600 ms stall inside a 5 s answer; the longest gap
does not, and where it fell lines it up with the other streams'), prompt and answer tokens as the engine
counted them (its ``usage``), and the status.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from testbed.load import LoadResult, PromptMaker, Request, drive

COMPLETIONS = "/v1/completions"


@dataclass
class Streamed:
    """One streamed answer as the client saw it: when each token arrived, and how it ended."""

    sent: float
    token_times: list[float] = field(default_factory=list)
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    status: str = "ok"
    ended: float | None = None

    def record(self, number: int, max_tokens: int) -> dict:
        """The request log's line: times in milliseconds, from the client's clock."""
        ended = self.ended if self.ended is not None else time.time()
        times = self.token_times
        line: dict[str, object] = {
            "ts": round(self.sent, 6),
            "id": number,
            "latency_ms": round((ended - self.sent) * 1000, 3),
            "status": self.status,
            "max_tokens": max_tokens,
        }
        if times:
            line["ttft_ms"] = round((times[0] - self.sent) * 1000, 3)
        if len(times) > 1:
            line["tpot_ms"] = round((times[-1] - times[0]) * 1000 / (len(times) - 1), 3)
            gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
            longest = max(range(len(gaps)), key=gaps.__getitem__)
            line["itl_max_ms"] = round(gaps[longest] * 1000, 3)
            line["itl_max_at_ms"] = round((times[longest] - self.sent) * 1000, 3)
        if self.prompt_tokens is not None:
            line["input_len"] = self.prompt_tokens
        line["output_len"] = self.completion_tokens if self.completion_tokens is not None else len(times)
        if self.finish_reason:
            line["finish_reason"] = self.finish_reason
        return line

    def take(self, event: dict, now: float) -> None:
        """Read one server-sent event's JSON."""
        for choice in event.get("choices") or ():
            if choice.get("text"):
                self.token_times.append(now)
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
        usage = event.get("usage")
        if isinstance(usage, dict):
            self.prompt_tokens = usage.get("prompt_tokens", self.prompt_tokens)
            self.completion_tokens = usage.get("completion_tokens", self.completion_tokens)


async def stream_one(client: httpx.AsyncClient, body: dict) -> Streamed:
    """Send one streaming completion and read it to its end, however it ends."""
    seen = Streamed(sent=time.time())
    try:
        async with client.stream("POST", COMPLETIONS, json=body) as response:
            if response.status_code != 200:
                await response.aread()
                seen.status = "error"
                seen.finish_reason = _error_type(response)
            else:
                async for line in response.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    payload = line[5:].strip()
                    if payload == "[DONE]":
                        break
                    with contextlib.suppress(ValueError):
                        seen.take(json.loads(payload), time.time())
    except httpx.TimeoutException:
        seen.status = "timeout"
    except httpx.HTTPError:
        seen.status = "error"
    seen.ended = time.time()
    if seen.status == "ok" and seen.finish_reason == "length" and body.get("max_tokens"):
        # The engine stopped before the answer it was asked for: its context was full (llama.cpp logs
        # the release with truncated = 1).
        if (seen.completion_tokens or len(seen.token_times)) < body["max_tokens"]:
            seen.status = "truncated"
    return seen


def _error_type(response: httpx.Response) -> str:
    with contextlib.suppress(ValueError, AttributeError):
        error = response.json().get("error", {})
        return str(error.get("type") or error.get("message") or response.status_code)
    return str(response.status_code)


async def drive_stream(
    base_url: str,
    requests: list[Request],
    prompts: PromptMaker,
    log: Path,
    result: LoadResult | None = None,
    stop: Callable[[], bool] = lambda: False,
    timeout_s: float = 120.0,
) -> LoadResult:
    """Send each request at its time as a streaming completion (testbed.load's drive); log each when it
    ends."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a", encoding="utf-8") as sink:

        async def send(
            client: httpx.AsyncClient, prompt: str, request: Request, number: int, counts: LoadResult
        ) -> None:
            counts.sent += 1
            seen = await stream_one(client, completion_body(prompt, request.max_tokens))
            if seen.status == "ok":
                counts.ok += 1
                counts.latencies_ms.append(((seen.ended or time.time()) - seen.sent) * 1000)
            else:
                counts.failed += 1
            sink.write(json.dumps(seen.record(number, request.max_tokens)) + "\n")
            sink.flush()

        return await drive(base_url, requests, prompts, stop, timeout_s, result, send)


def completion_body(prompt: str, max_tokens: int) -> dict:
    # Prompts differ request to request, but a shared prefix would still be served from the slot's
    # cache: the testbed measures the work a prompt costs, not the cache's luck.
    return {
        "prompt": prompt,
        "max_tokens": max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
        "cache_prompt": False,
    }
