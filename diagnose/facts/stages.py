"""Stage decomposition: where the mean goes, and which stage drives the tail.

A stage's share of the mean says where time goes on average; its share of the
*excess* of the P99 requests over the average request says which stage makes
the tail. The two often differ, and the tail is what users feel.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from diagnose.dump.schema import stage_columns
from diagnose.facts.model import Facts, StageKind, StageShare
from diagnose.facts.ranks import spearman
from diagnose.quantiles import quantile, quantiles

# The conventional stages of the dump contract, with their kinds. ``decode`` is LLM token
# generation (GPU); image decoding is ``image_decode``. The manifest's ``stages:`` map sets or
# overrides any stage's kind (``stages: {detokenize: cpu, rerank: gpu}``).
CPU_STAGES = frozenset(
    {
        "preprocess",
        "tokenize",
        "image_decode",
        "detokenize",
        "postprocess",
        "resize",
        "featurize",
        "serialize",
        "deserialize",
        "validation",  # TGI's validation workers: tokenizing and checking each request
    }
)
GPU_STAGES = frozenset({"forward", "prefill", "decode", "compute", "inference", "infer", "model", "generate"})
WAIT_STAGES = frozenset({"queue", "batch_wait", "network", "wait", "schedule"})
KINDS = (StageKind.CPU, StageKind.GPU, StageKind.WAIT)  # the kinds a manifest may declare


def stage_kind(name: str, declared: dict[str, StageKind] | None = None) -> StageKind:
    """A stage's kind: the manifest's word for it, else the contract's convention, else ``other``."""
    if declared and name in declared:
        return declared[name]
    if name in CPU_STAGES:
        return StageKind.CPU
    if name in GPU_STAGES:
        return StageKind.GPU
    if name in WAIT_STAGES or name.endswith(_WAIT_SUFFIXES):
        return StageKind.WAIT
    return StageKind.OTHER


# ``<stage>_queue`` or ``<stage>_wait``: the time a request waited for that stage's worker (a
# tokenizer thread, an ensemble's pre-processing model), as Triton reports a queue per model.
_WAIT_SUFFIXES = ("_queue", "_wait")


def waiting_for(name: str, stages: dict) -> str | None:
    """The stage whose worker ``name`` waits for, if ``name`` is ``<stage>_queue`` or ``<stage>_wait``."""
    for suffix in _WAIT_SUFFIXES:
        base = name.removesuffix(suffix)
        if base != name and base in stages:
            return base
    return None


def declared_kinds(manifest_extra: dict, warnings: list[str]) -> dict[str, StageKind]:
    """The manifest's ``stages:`` map, keeping only the kinds the contract knows."""
    declared = manifest_extra.get("stages")
    if declared is None:
        return {}
    if not isinstance(declared, dict):
        warnings.append("manifest.yaml: stages: expected a map such as {detokenize: cpu}; ignored")
        return {}
    kinds = {}
    for name, kind in declared.items():
        if str(kind).lower() in KINDS:
            kinds[str(name)] = StageKind(str(kind).lower())
        else:
            warnings.append(f"manifest.yaml: stages: {name}: {kind!r} is not cpu, gpu or wait; ignored")
    return kinds


_CPU_STAGE_KEYS = "name share_mean share_tail excess_share p99_ms wait_share cost_share cost_excess_share"
_CPU_STAGE_FACTS = (
    "cpu_stages.share_mean",
    "cpu_stage.us_per_token",
    *(f"cpu_stage.{k}" for k in _CPU_STAGE_KEYS.split()),
)
_GPU_STAGE_FACTS = ("forward.share_mean", "forward.share_tail", "forward.p99_ms")
_ALL_STAGE_FACTS = (
    "stages.count",
    "stages.tail_driver.name",
    "stages.tail_driver.excess_share",
    "stages.wait.share_mean",
    *_CPU_STAGE_FACTS,
    *_GPU_STAGE_FACTS,
)


def add_stage_facts(
    facts: Facts,
    requests: pd.DataFrame,
    source: str,
    declared: dict[str, StageKind] | None = None,
    sampled: str | None = None,
) -> None:
    """``sampled``: why the facts that need every request are not computed (the table is a sample)."""
    columns = stage_columns(requests)
    if not columns:
        return
    latency = requests["latency_ms"].to_numpy(dtype="float64")
    valid = np.isfinite(latency)
    if valid.sum() < 10:
        facts.cannot(_ALL_STAGE_FACTS, f"10 requests with a latency ({source} has {int(valid.sum())})")
        return
    latency = latency[valid]
    p99 = quantile(latency, 0.99)
    tail = latency >= p99
    mean_all, mean_tail = latency.mean(), latency[tail].mean()
    excess = mean_tail - mean_all
    rows: dict[str, StageShare] = {}
    for name, column in columns.items():
        values = np.nan_to_num(requests[column].to_numpy(dtype="float64")[valid], nan=0.0)
        p50, p99_stage = quantiles(values, (0.5, 0.99))
        rows[name] = StageShare(
            kind=stage_kind(name, declared),
            share=float(values.mean() / mean_all) if mean_all > 0 else 0.0,
            tail_share=float(values[tail].mean() / mean_tail) if mean_tail > 0 else 0.0,
            excess_share=float((values[tail].mean() - values.mean()) / excess) if excess > 0 else 0.0,
            p50_ms=float(p50),
            p99_ms=float(p99_stage),
        )
    facts.summary.stages = rows
    cite = f"{source}: {', '.join(columns.values())} against latency_ms"
    facts.add("stages.count", len(rows), cite)
    driver = max(rows, key=lambda n: rows[n].excess_share)
    facts.add("stages.tail_driver.name", driver, cite)
    facts.add("stages.tail_driver.excess_share", rows[driver].excess_share, cite)
    facts.add("stages.wait.share_mean", sum(r.share for r in rows.values() if r.kind == StageKind.WAIT), cite)
    # Time in no logged stage went somewhere unmeasured: an event loop blocked by CPU work, a lock,
    # a thread pool. Often the real answer, so it is a figure of its own.
    unaccounted = max(0.0, 1.0 - sum(r.share for r in rows.values()))
    facts.summary.unaccounted_share = unaccounted
    facts.add("stages.unaccounted_share", unaccounted, f"{cite}: latency in no stage")
    cpu_columns = [columns[n] for n in rows if rows[n].kind == StageKind.CPU]
    if sampled is not None:  # the work that arrived before each request: every request, not 1 in N
        facts.cannot(["stages.unaccounted_load_corr"], sampled)
    else:
        _add_unaccounted_load(facts, requests, columns, cpu_columns, valid, f"{cite}: latency in no stage")
    cpu = [n for n in rows if rows[n].kind == StageKind.CPU]
    kinds = ", ".join(f"{name} ({row.kind})" for name, row in rows.items())
    have = f"{source} has {kinds}"
    if not cpu:
        facts.cannot(_CPU_STAGE_FACTS, f"a CPU-side stage such as stage_preprocess_ms ({have})")
    if cpu:
        facts.add("cpu_stages.share_mean", sum(rows[n].share for n in cpu), cite)
        waits = {base: name for name in rows if (base := waiting_for(name, rows)) is not None}

        def cost(stage: str, field: str) -> float:
            """The stage's own time plus the time spent waiting for its worker."""
            waited = getattr(rows[waits[stage]], field) if stage in waits else 0.0
            return float(getattr(rows[stage], field)) + float(waited)

        top = max(cpu, key=lambda n: cost(n, "share"))
        used = [columns[top], *([columns[waits[top]]] if top in waits else [])]
        cite_top = f"{source}: {', '.join(used)} against latency_ms"
        facts.add("cpu_stage.name", top, cite_top)
        for key in ("share_mean", "share_tail", "excess_share", "p99_ms"):
            field = {"share_mean": "share", "share_tail": "tail_share"}.get(key, key)
            facts.add(f"cpu_stage.{key}", getattr(rows[top], field), cite_top)
        facts.add("cpu_stage.wait_share", cost(top, "share") - rows[top].share, cite_top)
        facts.add("cpu_stage.cost_share", cost(top, "share"), cite_top)
        facts.add("cpu_stage.cost_excess_share", cost(top, "excess_share"), cite_top)
        _add_cost_per_token(facts, requests, top, columns[top], valid, source)
    if "decode" in rows and rows["decode"].kind == StageKind.GPU:  # LLM token generation
        facts.add("stages.generation_share", rows["decode"].share, f"{source}: {columns['decode']}")
    gpu = [n for n in rows if rows[n].kind == StageKind.GPU]
    if not gpu:
        facts.cannot(_GPU_STAGE_FACTS, f"a GPU stage such as stage_forward_ms or stage_prefill_ms ({have})")
    if gpu:
        cite_gpu = f"{source}: {', '.join(columns[n] for n in gpu)} against latency_ms"
        facts.add("forward.share_mean", sum(rows[n].share for n in gpu), cite_gpu)
        facts.add("forward.share_tail", sum(rows[n].tail_share for n in gpu), cite_gpu)
        main = max(gpu, key=lambda n: rows[n].share)
        facts.add("forward.p99_ms", rows[main].p99_ms, cite_gpu)


# The stages whose work is counted in tokens, and the column that counts them: a tokenizer's work grows
# with the prompt, a detokenizer's with the answer. (``input_len`` is the request's natural unit; a
# service that logs bytes there makes the cost per token read lower, never higher.)
_TOKENS_OF = {"tokenize": "input_len", "validation": "input_len", "detokenize": "output_len"}
_MIN_REQUESTS_FOR_SLOPE = 50
_LENGTH_BINS = 10


def _add_cost_per_token(
    facts: Facts, requests: pd.DataFrame, stage: str, column: str, valid: np.ndarray, source: str
) -> None:
    """What each further token costs the stage, in microseconds: the slope of its median time over ten
    bins of the requests' token counts. The slope, not time over tokens, so that a call's fixed cost
    (a few hundred microseconds of Python around any tokenizer) does not read as a slow tokenizer on
    short prompts; medians, so that a request that waited for the GIL moves nothing."""
    fact = ("cpu_stage.us_per_token",)
    counted = _TOKENS_OF.get(stage)
    if counted is None or counted not in requests:
        facts.cannot(fact, f"a tokenize or detokenize stage beside the requests' token counts ({stage})")
        return
    spent = requests[column].to_numpy(dtype="float64")[valid]
    tokens = requests[counted].to_numpy(dtype="float64")[valid]
    usable = np.isfinite(spent) & np.isfinite(tokens) & (tokens > 0)
    spent, tokens = spent[usable], tokens[usable]
    if spent.size < _MIN_REQUESTS_FOR_SLOPE:
        facts.cannot(fact, f"{_MIN_REQUESTS_FOR_SLOPE} requests with {counted} ({source} has {spent.size})")
        return
    low, high = quantiles(tokens, (0.1, 0.9))
    medians = _binned_medians(tokens, spent) if high >= 1.5 * low else []
    if len(medians) < 3:  # lengths too alike for a slope
        facts.cannot(fact, f"requests of differing lengths ({counted} P10 {low:.0f}, P90 {high:.0f})")
        return
    length, time_ms = np.array(medians).T
    slope_ms = float(np.polyfit(length, time_ms, 1)[0])
    facts.add(
        fact[0],
        max(0.0, slope_ms * 1000.0),
        f"{source}: {column} against {counted}, the slope of its medians over {len(medians)} bins of length",
    )


def _binned_medians(tokens: np.ndarray, spent: np.ndarray) -> list[tuple[float, float]]:
    """Per bin of length (ten quantile bins, fewer where lengths repeat): the median length and time."""
    edges = np.unique(np.quantile(tokens, np.linspace(0.0, 1.0, _LENGTH_BINS + 1)))
    bins = np.clip(np.searchsorted(edges, tokens, side="right") - 1, 0, max(edges.size - 2, 0))
    return [(np.median(tokens[bins == b]), np.median(spent[bins == b])) for b in np.unique(bins)]


_LOAD_WINDOW_S = 1.0  # the arrivals a blocked event loop still has to get through
_MIN_REQUESTS_FOR_LOAD = 100


def _add_unaccounted_load(
    facts: Facts,
    requests: pd.DataFrame,
    columns: dict[str, str],
    cpu_columns: list[str],
    valid: np.ndarray,
    cite: str,
) -> None:
    """Does the time in no stage grow with the work that arrived just before each request? An event
    loop that does CPU work serves its handlers one at a time, so a request waits for the CPU work of
    every one that came in just before it, before any timer of its own starts. That work is the CPU
    stages' time of those requests where the log has such stages (a long prompt costs the loop more
    than a short one), else their number. A fixed cost the stages miss (the network, a proxy) follows
    neither."""
    if int(valid.sum()) < _MIN_REQUESTS_FOR_LOAD:
        return
    ts = requests["ts"].to_numpy(dtype="float64")[valid]

    def summed(names: Iterable[str]) -> np.ndarray:
        return sum(
            (np.nan_to_num(requests[c].to_numpy(dtype="float64")[valid], nan=0.0) for c in names),
            np.zeros(ts.size),
        )

    unaccounted = requests["latency_ms"].to_numpy(dtype="float64")[valid] - summed(columns.values())
    # the dump's rows are sorted by ts (dump/model.py), so the arrivals before each are a search away
    first = np.searchsorted(ts, ts - _LOAD_WINDOW_S, side="left")
    if cpu_columns:
        done = np.concatenate(([0.0], np.cumsum(summed(cpu_columns))))
        ahead, what = done[np.arange(ts.size)] - done[first], f"their {', '.join(cpu_columns)}"
    else:
        ahead, what = (np.arange(ts.size) - first).astype("float64"), "their number"
    facts.add(
        "stages.unaccounted_load_corr",
        spearman(ahead, unaccounted),
        f"{cite}, against the requests that arrived in the {_LOAD_WINDOW_S:g} s before each ({what})",
    )
