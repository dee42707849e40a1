"""The requests a run sends and when: prompts drawn as the method says, arrivals as a Poisson process,
or both replayed from a request log the user already has (``--replay``).

Uniform lengths flatter a service (every batch alike, no long prompt holding a slot), so without the
user's own prompts the run draws a mix: 70 % short, 20 % medium, 10 % long. With ``--prompts FILE``
the user's prompts are drawn instead: in the same 70/20/10 shares where the file classes them
(``"size": "short"``), else each equally often, which keeps the file's own mix of lengths.
Prompts are made of distinct words so that no two share a prefix a server could cache, and no built-in
prompt is sent twice (:func:`fresh_prompts`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

import numpy as np
import pandas as pd

from diagnose.errors import InputError
from diagnose.load.plan import Prompt

MIX = {"short": 0.7, "medium": 0.2, "long": 0.1}
# The built-in mix's lengths, in words (about 1.3 tokens each for English BPE tokenizers) and in
# answer tokens: a chat turn, a document to summarise, a long context.
BUILT_IN = {"short": (50, 32), "medium": (200, 128), "long": (800, 256)}
DEFAULT_MAX_TOKENS = 128
_WORDS = (
    "time year people way day man thing woman life child world school state family student group "
    "country problem hand part place case week company system program question work government "
    "number night point home water room mother area money story fact month lot right study book "
    "eye job word business issue side kind head house service friend father power hour game line "
    "end member law car city community name president team minute idea kid body information back "
    "parent face others level office door health person art war history party result change morning "
    "reason research girl guy moment air teacher force education river cloud stone bridge garden"
).split()


def fresh_prompts(seed: int) -> Iterator[Prompt]:
    """The built-in 70/20/10 mix without end, each prompt of words drawn for it alone.

    A prompt sent again is answered from an engine's prompt cache (vLLM's automatic prefix caching,
    SGLang's radix cache, llama.cpp's ``--cache-ram``, each on by default), faster than new traffic:
    llama.cpp's server, sent the same 400 prompts a second and a third time, completed 17.3 and 18.3 req/s
    against 14.1 the first (10.1-10.4 each time with its cache off). Drawn from a fixed set, later steps
    would meet more repeats than earlier ones and the knee would be optimistic; so each stage of each
    sending process draws its own, from its seed.
    """
    rng = np.random.default_rng([seed, 7])
    sizes, shares = list(MIX), list(MIX.values())
    while True:
        for size in rng.choice(sizes, size=256, p=shares):
            words, max_tokens = BUILT_IN[str(size)]
            text = " ".join(rng.choice(_WORDS, size=words))
            yield Prompt(f"Summarise: {text}", max_tokens, str(size))


def stage_seed(run_seed: int, stage_index: int, stream: int) -> int:
    """The seed of the prompts one sending process (``stream``) draws at a step: a run's are
    reproducible from its ``--seed``, and no two stages or processes draw the same."""
    return run_seed * 1_000 + stage_index * 10 + stream


def prompts_for(pool: list[Prompt], count: int, seed: int) -> Iterator[Prompt]:
    """``count`` prompts for a stage: drawn from the user's (:func:`draw`), or with none given the
    built-in mix made afresh (:func:`fresh_prompts`), as they are sent."""
    return iter(draw(pool, count, seed)) if pool else islice(fresh_prompts(seed), count)


def repeats_note(prompts: list[Prompt], source: Path) -> str:
    """What a run that sends the user's prompts again and again cannot measure: new traffic."""
    distinct = len({p.text for p in prompts})
    return (
        f"{distinct:,} distinct prompts from {source}, drawn at random for each request, so sent again as "
        "the run goes on: an engine that caches prompts (vLLM's automatic prefix caching, SGLang's radix "
        "cache, llama.cpp's --cache-ram) answers a repeat from its cache, faster than new requests, and the "
        "knee may be optimistic; give many more prompts than the run sends, or run without --prompts (the "
        "built-in mix never repeats one)"
    )


def read_prompts(path: Path) -> list[Prompt]:
    """The user's prompts: JSON lines (``{"prompt": ..., "max_tokens": 64, "size": "short"}``, the last
    two optional) or plain text, one prompt a line."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as error:
        raise InputError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start})") from None
    prompts = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if line.lstrip().startswith("{"):
            prompts.append(_json_prompt(path, number, line))
        else:
            prompts.append(Prompt(line.strip(), DEFAULT_MAX_TOKENS))
    if not prompts:
        raise InputError(f"{path}: no prompts (expected one a line, as text or JSON)")
    return prompts


def _json_prompt(path: Path, number: int, line: str) -> Prompt:
    where = f"{path}:{number}"
    try:
        row = json.loads(line)
    except json.JSONDecodeError as error:
        raise InputError(f"{where}, column {error.colno}: not JSON ({error.msg})") from None
    text = row.get("prompt") if isinstance(row, dict) else None
    if not isinstance(text, str) or not text.strip():
        raise InputError(f'{where}: expected {{"prompt": "...", ...}} with a non-empty prompt')
    max_tokens = row.get("max_tokens", DEFAULT_MAX_TOKENS)
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise InputError(f"{where}: max_tokens {max_tokens!r}: expected a positive whole number")
    size = row.get("size", "")
    if size not in ("", *MIX):
        raise InputError(f"{where}: size {size!r}: expected one of {', '.join(MIX)}")
    return Prompt(text, max_tokens, size)


def draw(prompts: list[Prompt], count: int, seed: int) -> list[Prompt]:
    """``count`` prompts drawn from the user's: 70/20/10 by class where the file classes them."""
    rng = np.random.default_rng([seed, 11])
    sizes = sorted({p.size for p in prompts} - {""}, key=list(MIX).index)
    if not sizes:
        return [prompts[i] for i in rng.integers(0, len(prompts), size=count)]
    by_size = {size: [p for p in prompts if p.size == size] for size in sizes}
    shares = np.array([MIX[size] for size in sizes])
    chosen = rng.choice(sizes, size=count, p=shares / shares.sum())
    return [by_size[str(size)][rng.integers(0, len(by_size[str(size)]))] for size in chosen]


def poisson_arrivals(rate_rps: float, duration_s: float, seed: int, stream: int = 0) -> np.ndarray:
    """Send times, in seconds from the stage's start, of a Poisson process at ``rate_rps``: independent
    exponential gaps, as independent users arrive. ``stream`` separates the processes of one run (the
    union of N streams at rate/N is again Poisson at rate)."""
    rng = np.random.default_rng([seed, stream, int(rate_rps * 1000), int(duration_s * 1000)])
    expected = rate_rps * duration_s
    gaps = rng.exponential(1.0 / rate_rps, size=int(expected + 6 * np.sqrt(expected) + 10))
    times = np.cumsum(gaps)
    return times[times < duration_s]


TOKENS_PER_WORD = 1.3  # English text in a BPE tokenizer: the built-in prompts' words are counted so too
REPLAY_MAX = 20_000  # requests of a log kept for a replay: its first, in time order
_MIN_REPLAY = 20


@dataclass(frozen=True)
class Replay:
    """A request log's pattern, to send again at any rate: its gaps between arrivals (as multiples of
    their mean, so the recorded burstiness is kept whatever the rate) and each request's lengths."""

    source: str
    gaps: list[float]  # each arrival's gap to the one before, over the mean gap
    words: list[int]  # each request's prompt, in words (its input tokens / 1.3)
    max_tokens: list[int]  # each request's answer, in tokens (DEFAULT_MAX_TOKENS where the log has none)
    recorded_rps: float
    burstiness: float  # the gaps' coefficient of variation: 1 for Poisson arrivals, more when bursty

    def describe(self) -> str:
        return (
            f"replaying {self.source}: {len(self.gaps):,} requests at their recorded gaps (recorded at "
            f"{self.recorded_rps:.3g} req/s, gaps' coefficient of variation {self.burstiness:.2f}, Poisson's "
            f"1), scaled to each stage's rate, with their recorded prompt and answer lengths"
        )


def read_replay(path: Path) -> Replay:
    """A request log in any form ``diagnose file`` reads, as a pattern to replay: it needs request
    times (``ts``); lengths from ``input_len`` and ``output_len`` where it has them."""
    from diagnose.dump import load_dump

    requests = load_dump(str(path)).tables.get("requests")
    if requests is None or "ts" not in requests or requests["ts"].notna().sum() < _MIN_REPLAY:
        raise InputError(
            f"{path}: --replay needs a request log with the requests' times (ts), at least "
            f"{_MIN_REPLAY} of them"
        )
    rows = requests[requests["ts"].notna()].sort_values("ts", kind="stable").head(REPLAY_MAX)
    ts = rows["ts"].to_numpy(dtype="float64")
    gaps = np.diff(ts, prepend=ts[0])
    mean = float(gaps[1:].mean()) if len(gaps) > 1 else 0.0
    if not mean > 0:
        raise InputError(f"{path}: every request has the same time: no arrivals to replay")
    gaps[0] = mean  # the first request's gap is unknown: the mean
    words = _lengths(rows, "input_len", lambda tokens: max(1, round(tokens / TOKENS_PER_WORD)), 50)
    answers = _lengths(rows, "output_len", lambda tokens: max(1, round(tokens)), DEFAULT_MAX_TOKENS)
    return Replay(
        str(path),
        [float(g) for g in gaps / mean],
        words,
        answers,
        1.0 / mean,
        float(gaps.std() / mean),
    )


def replay_arrivals(
    replay: Replay, rate_rps: float, duration_s: float, seed: int, stream: int = 0, streams: int = 1
) -> tuple[np.ndarray, np.ndarray]:
    """(send times in seconds from the stage's start, the replayed requests' indexes): the log's gaps from
    a drawn point in it, scaled to ``rate_rps`` (the whole stage's), round again from its start when they
    run out. Of ``streams`` processes sending together, ``stream`` sends every ``streams``-th request of
    that one sequence: every process draws the same point, so together they send the log's own order."""
    rng = np.random.default_rng([seed, int(rate_rps * 1000), int(duration_s * 1000), 13])
    count = len(replay.gaps)
    first = int(rng.integers(0, count))
    needed = int(rate_rps * duration_s * 2 + 20)
    indexes = (first + np.arange(needed)) % count
    times = np.cumsum(np.asarray(replay.gaps)[indexes]) / rate_rps
    keep = (times < duration_s) & (np.arange(needed) % streams == stream)
    return times[keep], indexes[keep]


def replay_prompts(replay: Replay, indexes: np.ndarray, seed: int) -> list[Prompt]:
    """The replayed requests' prompts: each of its recorded length, of words drawn for it."""
    rng = np.random.default_rng([seed, 17])
    return [
        Prompt(f"Summarise: {' '.join(rng.choice(_WORDS, size=replay.words[i]))}", replay.max_tokens[i])
        for i in indexes
    ]


def _lengths(rows: pd.DataFrame, column: str, convert: Callable[[float], int], default: int) -> list[int]:
    if column not in rows:
        return [default] * len(rows)
    values = rows[column].to_numpy(dtype="float64")
    return [convert(v) if np.isfinite(v) and v > 0 else default for v in values]
