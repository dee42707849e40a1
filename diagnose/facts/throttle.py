"""Is a GPU held below its clocks under load, why, and what does it cost the forward pass?

Only working samples count (utilisation of at least 10 %): an idle GPU drops
its clocks on purpose, and says so with the gpu_idle reason. Throttle reasons
may be NVML's bitmask or names.

Each GPU is judged on its own, and the worst one is reported by name: one GPU
of eight held down is a real cause that an average over the eight hides. And
a GPU is judged by its clocks *while a slowing reason is reported*, not by
its median over all its working time: a GPU that throttles in spells (40 % of
the time, say) has a median clock at its maximum and is throttled all the same.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import numpy as np
import pandas as pd

from diagnose.dump.model import Dump
from diagnose.dump.schema import SLOWING_REASONS, THROTTLE_BITS
from diagnose.facts.engine import said_by
from diagnose.facts.model import Facts
from diagnose.quantiles import median

BUSY_PCT = 10.0
_COLUMNS_READ = ("ts", "gpu", "sm_clock_mhz", "max_sm_clock_mhz", "throttle_reasons")


@dataclass(frozen=True)
class _Working:
    """The GPUs' working samples (utilisation of 10 % or more), and which GPU throttled the most."""

    rows: pd.DataFrame
    ratio: np.ndarray  # SM clock over its maximum
    throttled: np.ndarray | None  # a slowing reason reported; None where no row has reasons
    ids: np.ndarray
    worst: object
    named: str  # GPU 5, or "the GPU" where no row names its GPU


def _working(gpu: pd.DataFrame | None) -> _Working | None:
    if gpu is None or not {"sm_clock_mhz", "max_sm_clock_mhz"} <= set(gpu.columns):
        return None
    busy = gpu["util_pct"] >= BUSY_PCT if "util_pct" in gpu.columns else pd.Series(True, index=gpu.index)
    # Only the columns read below: a day of 8 GPUs is 700,000 rows of a dozen columns.
    rows = gpu.loc[busy, [c for c in _COLUMNS_READ if c in gpu.columns]]
    if rows.empty:
        return None
    ratio = rows["sm_clock_mhz"] / rows["max_sm_clock_mhz"].where(rows["max_sm_clock_mhz"] > 0)
    throttled = throttled_rows(rows)
    ids = rows["gpu"].to_numpy() if "gpu" in rows.columns else np.zeros(len(rows), dtype=int)
    worst = _worst_gpu(ids, ratio.to_numpy(dtype="float64"), throttled)
    if worst is None:  # no row names its GPU: judge them together
        ids, worst = np.zeros(len(rows), dtype=int), 0
    named = _gpu_name(worst) if "gpu" in rows.columns else "the GPU"
    return _Working(rows, ratio.to_numpy(dtype="float64"), throttled, ids, worst, named)


def add_throttle_facts(facts: Facts, dump: Dump) -> None:
    _add_statements(facts, dump)
    gpu = dump.table("gpu")
    working = _working(gpu)
    if gpu is None or working is None:
        return
    source, named, throttled = dump.source("gpu"), working.named, working.throttled
    mine = working.ids == working.worst
    facts.add("gpu.throttle_gpu", named, f"{source}: the GPU with the most throttled working time")
    cite = f"{source}: sm_clock_mhz / max_sm_clock_mhz of {named} while util_pct >= {BUSY_PCT:.0f}"
    facts.add("gpu.sm_clock_ratio.p50", float(_median(working.ratio[mine])), cite)
    if "temp_c" in gpu.columns:
        facts.add("gpu.temp_c.max", float(gpu["temp_c"].max()), f"{source}: temp_c")
    if throttled is None:
        return
    cite_reasons = f"{source}: throttle_reasons of {named} while util_pct >= {BUSY_PCT:.0f}"
    facts.add("gpu.throttled_share", float(throttled[mine].mean()), cite_reasons)
    if throttled[mine].any():
        facts.add(
            "gpu.sm_clock_ratio.throttled_p50",
            float(_median(working.ratio[mine & throttled])),
            f"{cite}, in the samples that report a slowing reason",
        )
    counts: Counter[str] = Counter()
    for value, rows in working.rows.loc[mine & throttled, "throttle_reasons"].value_counts().items():
        counts.update(dict.fromkeys(reason_names(value) & SLOWING_REASONS, int(rows)))
    if counts:
        facts.add("gpu.throttle_reason", counts.most_common(1)[0][0], cite_reasons)
    _add_forward_cost(facts, dump, working)


def _add_statements(facts: Facts, dump: Dump) -> None:
    """The GPU's own monitor saying its clocks were held down (throttle events: DCGM's health watch
    "Detected clocks event due to thermal violation in GPU 2", its diagnostics' violation seconds).
    DCGM counts a violation only while the clocks are below what the work asks for, so the statement
    is of throttling under load, where an idle GPU's low clocks are not."""
    events = dump.table("events")
    if events is None or "kind" not in events.columns:
        return
    said = events[(events["kind"].astype("string") == "throttle").fillna(False).to_numpy()]
    source = dump.source("events")
    facts.add("gpu.throttle_statements", len(said), f"{source}: throttle events")
    if len(said):
        first = said.iloc[0]
        facts.add(
            "gpu.throttle_line",
            str(first.get("message", ""))[:200],
            f"{source}: first throttle{said_by(first)}",
        )


def throttled_rows(rows: pd.DataFrame) -> np.ndarray | None:
    """Per row: does it report a reason that holds clocks down under load? None without reasons."""
    if "throttle_reasons" not in rows.columns:
        return None
    # A day of 8 GPUs is ~700,000 rows but a few dozen distinct values: name each value once.
    codes, values = pd.factorize(rows["throttle_reasons"], use_na_sentinel=True)
    slowing = np.array([bool(reason_names(value) & SLOWING_REASONS) for value in values] + [False])
    return slowing[codes]  # code -1 (missing) reads the trailing False


def _median(values: np.ndarray) -> float:
    """The median of the finite values; NaN (no warning) when there are none."""
    finite = values[np.isfinite(values)]
    return float(median(finite)) if finite.size else float("nan")


def _gpu_name(gpu: object) -> str:
    """GPU 3, also where a row without an index made the column's numbers floats (3.0)."""
    return f"GPU {int(gpu)}" if isinstance(gpu, float) and gpu.is_integer() else f"GPU {gpu}"


def _worst_gpu(ids: np.ndarray, ratio: np.ndarray, throttled: np.ndarray | None) -> object:
    """The GPU with the largest throttled share of its working time (without reasons: the lowest clocks);
    of equals, the first seen; None where no row has a GPU index."""
    codes, gpus = pd.factorize(ids)  # in the order first seen, as pd.unique
    order = np.argsort(codes, kind="stable")  # each GPU's rows together: no mask of every row per GPU
    bounds = np.searchsorted(codes[order], np.arange(len(gpus) + 1))
    best, key = None, None
    for code, gpu in enumerate(gpus):
        mine = order[bounds[code] : bounds[code + 1]]
        share = float(throttled[mine].mean()) if throttled is not None else 0.0
        candidate = (share, -float(_median(ratio[mine])))
        if key is None or candidate > key:
            best, key = gpu, candidate
    return best.item() if isinstance(best, np.generic) else best


@dataclass(frozen=True)
class _Served:
    """Of every request: did the throttled GPU serve it in a second it reported a slowing reason, and
    did it serve it at all (every request, where one GPU is sampled)."""

    slowed: np.ndarray
    served: np.ndarray
    whose: str  # "" or " of the requests GPU 5 served (requests: worker)", for a citation


def _served(requests: pd.DataFrame, working: _Working) -> _Served | str | None:
    """Which requests ran on the throttled GPU while it was slowed; why not where the log cannot say.

    With several GPUs, only the requests that name the throttled one (``worker`` ``gpu5``, ``cuda:5``)
    can say what its clocks cost: the others' requests ran at full clocks in the same seconds, and one
    GPU of eight held down would read as no cost at all.
    """
    if working.throttled is None:
        return None
    mine = working.ids == working.worst
    ts, throttled = working.rows["ts"].to_numpy()[mine], working.throttled[mine]
    if not throttled.any():
        return None
    served, whose = np.ones(len(requests), dtype=bool), ""
    gpus = len(pd.unique(working.ids))
    if gpus > 1:
        named = _served_by(requests, working.worst)
        if named is None:
            return (
                f"requests that say which of the {gpus} GPUs served them (requests: worker, e.g. gpu5): "
                f"the others' requests ran at full clocks in {working.named}'s throttled seconds"
            )
        served, whose = named, f" of the requests {working.named} served (requests: worker)"
    order = np.argsort(ts, kind="stable")
    ts, throttled = ts[order], throttled[order]
    nearest = np.clip(np.searchsorted(ts, requests["ts"].to_numpy(), side="right") - 1, 0, ts.size - 1)
    return _Served(served & throttled[nearest], served, whose)


def _forward_cost(requests: pd.DataFrame, found: _Served) -> float | None:
    """The throttled GPU's median forward time in its slowed seconds over that in its others."""
    forward = pd.to_numeric(requests["stage_forward_ms"], errors="coerce").to_numpy(dtype="float64")
    slowed, other = found.slowed, found.served & ~found.slowed
    if slowed.sum() < 20 or other.sum() < 20:
        return None
    return _median(forward[slowed]) / _median(forward[other])


def _add_forward_cost(facts: Facts, dump: Dump, working: _Working) -> None:
    requests = dump.table("requests")
    if requests is None or "stage_forward_ms" not in requests.columns:
        return
    found = _served(requests, working)
    if isinstance(found, str):
        facts.cannot(["gpu.throttle_forward_cost"], found)
        return
    cost = _forward_cost(requests, found) if found is not None else None
    if found is None or cost is None:
        return
    facts.add(
        "gpu.throttle_forward_cost",
        float(cost),
        f"{dump.source('requests')}: stage_forward_ms{found.whose} in throttled vs other seconds of "
        f"{dump.source('gpu')}",
    )


def slowed_requests(dump: Dump, requests: pd.DataFrame) -> tuple[np.ndarray, float, str] | None:
    """The requests the throttled GPU served while slowed, the forward time it cost them (x), and the
    GPU's name; None where the dump cannot say (the expected gain of restoring its clocks reads this)."""
    working = _working(dump.table("gpu"))
    if working is None or "stage_forward_ms" not in requests.columns:
        return None
    found = _served(requests, working)
    if found is None or isinstance(found, str):
        return None
    cost = _forward_cost(requests, found)
    return None if cost is None else (found.slowed, cost, working.named)


_GPU_WORKER = re.compile(r"(?:^|[^a-z])(?:gpu|cuda|device|dev)[\s:_#-]*(\d+)$", re.IGNORECASE)


def _served_by(requests: pd.DataFrame, gpu: object) -> np.ndarray | None:
    """Which requests the GPU served, where the log names each request's GPU; None where it does not."""
    if "worker" not in requests.columns:
        return None
    names = requests["worker"].astype("string").fillna("")
    index = names.str.extract(_GPU_WORKER, expand=False)
    if index.isna().mean() > 0.5:
        return None
    wanted = str(int(gpu)) if isinstance(gpu, int | float | np.integer | np.floating) else str(gpu)
    return (index == wanted).to_numpy(dtype=bool)


def reason_names(value: object) -> frozenset[str]:
    """NVML's clock-event reasons as names, from a bitmask (number or hex) or ;-joined names."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return frozenset()
    if isinstance(value, int | float | np.integer | np.floating):
        mask = int(value)
        return frozenset(name for bit, name in THROTTLE_BITS.items() if mask & bit)
    text = str(value).strip().lower()
    if text.startswith("0x"):
        return reason_names(int(text, 16))
    return frozenset(part.strip() for part in text.replace(",", ";").split(";") if part.strip())
