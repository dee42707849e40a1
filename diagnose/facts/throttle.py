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

import numpy as np
import pandas as pd

from diagnose.dump.model import Dump
from diagnose.dump.schema import SLOWING_REASONS, THROTTLE_BITS
from diagnose.facts.model import Facts
from diagnose.quantiles import median

BUSY_PCT = 10.0
_COLUMNS_READ = ("ts", "gpu", "sm_clock_mhz", "max_sm_clock_mhz", "throttle_reasons")


def add_throttle_facts(facts: Facts, dump: Dump) -> None:
    gpu = dump.table("gpu")
    if gpu is None or not {"sm_clock_mhz", "max_sm_clock_mhz"} <= set(gpu.columns):
        return
    source = dump.source("gpu")
    busy = gpu["util_pct"] >= BUSY_PCT if "util_pct" in gpu.columns else pd.Series(True, index=gpu.index)
    # Only the columns read below: a day of 8 GPUs is 700,000 rows of a dozen columns.
    busy_rows = gpu.loc[busy, [c for c in _COLUMNS_READ if c in gpu.columns]]
    if busy_rows.empty:
        return
    ratio = busy_rows["sm_clock_mhz"] / busy_rows["max_sm_clock_mhz"].where(busy_rows["max_sm_clock_mhz"] > 0)
    throttled = throttled_rows(busy_rows)
    ids = busy_rows["gpu"].to_numpy() if "gpu" in busy_rows.columns else np.zeros(len(busy_rows), dtype=int)
    worst = _worst_gpu(ids, ratio.to_numpy(dtype="float64"), throttled)
    if worst is None:  # no row names its GPU: judge them together
        ids, worst = np.zeros(len(busy_rows), dtype=int), 0
    mine = ids == worst
    named = _gpu_name(worst) if "gpu" in busy_rows.columns else "the GPU"
    facts.add("gpu.throttle_gpu", named, f"{source}: the GPU with the most throttled working time")
    cite = f"{source}: sm_clock_mhz / max_sm_clock_mhz of {named} while util_pct >= {BUSY_PCT:.0f}"
    facts.add("gpu.sm_clock_ratio.p50", float(_median(ratio.to_numpy()[mine])), cite)
    if "temp_c" in gpu.columns:
        facts.add("gpu.temp_c.max", float(gpu["temp_c"].max()), f"{source}: temp_c")
    if throttled is None:
        return
    cite_reasons = f"{source}: throttle_reasons of {named} while util_pct >= {BUSY_PCT:.0f}"
    facts.add("gpu.throttled_share", float(throttled[mine].mean()), cite_reasons)
    if throttled[mine].any():
        facts.add(
            "gpu.sm_clock_ratio.throttled_p50",
            float(_median(ratio.to_numpy()[mine & throttled])),
            f"{cite}, in the samples that report a slowing reason",
        )
    counts: Counter[str] = Counter()
    for value, rows in busy_rows.loc[mine & throttled, "throttle_reasons"].value_counts().items():
        counts.update(dict.fromkeys(reason_names(value) & SLOWING_REASONS, int(rows)))
    if counts:
        facts.add("gpu.throttle_reason", counts.most_common(1)[0][0], cite_reasons)
    gpus = len(pd.unique(ids))
    _add_forward_cost(facts, dump, busy_rows["ts"].to_numpy()[mine], throttled[mine], worst, gpus)


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


def _add_forward_cost(
    facts: Facts, dump: Dump, ts: np.ndarray, throttled: np.ndarray, gpu: object, gpus: int
) -> None:
    """Median forward time of the throttled GPU's requests in its throttled seconds against the others.

    With several GPUs, only the requests that name the throttled one (``worker`` ``gpu5``, ``cuda:5``)
    can say what its clocks cost: the others' requests ran at full clocks in the same seconds, and one
    GPU of eight held down would read as no cost at all.
    """
    requests = dump.table("requests")
    if requests is None or "stage_forward_ms" not in requests.columns or not throttled.any():
        return
    whose = ""
    if gpus > 1:
        served = _served_by(requests, gpu)
        if served is None:
            facts.cannot(
                ["gpu.throttle_forward_cost"],
                f"requests that say which of the {gpus} GPUs served them (requests: worker, e.g. gpu5): "
                f"the others' requests ran at full clocks in {_gpu_name(gpu)}'s throttled seconds",
            )
            return
        requests, whose = requests[served], f" of the requests {_gpu_name(gpu)} served (requests: worker)"
    order = np.argsort(ts, kind="stable")
    ts, throttled = ts[order], throttled[order]
    nearest = np.clip(np.searchsorted(ts, requests["ts"].to_numpy(), side="right") - 1, 0, ts.size - 1)
    forward = requests["stage_forward_ms"].to_numpy(dtype="float64")
    state = throttled[nearest]
    if state.sum() < 20 or (~state).sum() < 20:
        return
    cost = _median(forward[state]) / _median(forward[~state])
    facts.add(
        "gpu.throttle_forward_cost",
        float(cost),
        f"{dump.source('requests')}: stage_forward_ms{whose} in throttled vs other seconds of "
        f"{dump.source('gpu')}",
    )


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
