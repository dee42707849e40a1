"""TensorRT-LLM's PyTorch backend log: its per-iteration line (``print_iter_log``) -> the ``server`` table.

With ``print_iter_log`` on, the executor (``tensorrt_llm/_torch/pyexecutor/py_executor.py``, read in
its source) writes a line each iteration, its fields named; they came in four generations:

- ``iter = N, global_rank = G, rank = R, currank_total_requests = a/b, elapsed_time = 0.08s,
  timestamp = 2025-08-07 02:28:51, states = {...}`` (``print``, the first);
- the same with ``num_scheduled_requests: N`` before ``states`` (``logger.info``);
- ``host_step_time = 82.3ms, prev_device_step_time = 80.1ms`` (``N/A`` at the first) in place of
  ``elapsed_time``;
- ``num_scheduled_requests = N, kv_cache_util = 0.412`` (or ``N/A``) after ``rank``.

``states`` is the model engine's ``iter_states``: ``num_ctx_requests``, ``num_ctx_tokens`` (the
prompt tokens the step prefilled) and ``num_generation_tokens``. An iteration lasts milliseconds and
its ``timestamp`` has whole seconds (the server's zone, no offset), so the rows are per second: the
most requests scheduled (``running``), the fullest KV cache (``kv_cache_usage_pct``), and the tokens
the second's iterations generated and prefilled (``tokens_per_s``, ``prompt_tokens_per_s``). A second
with no iteration has no row: the executor writes nothing while it waits for requests, so a gap is idle
time as often as a long step (and a step's own time, which counts that wait, says no more). Every rank
writes its own line in the later generations: only the lowest global rank's are kept, and the report
says how many ranks were left out.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from diagnose.importers.base import (
    Claim,
    Imported,
    Importer,
    Source,
    Strength,
    claim,
    local_epochs,
    zone_note,
)
from diagnose.units import counted

_ITER = re.compile(r"\biter = (\d+), global_rank = (\d+), rank = (\d+), ")
_FIELDS = {
    "scheduled": re.compile(r"\bnum_scheduled_requests(?::| =) (\d+)"),
    "kv": re.compile(r"\bkv_cache_util = (\d+(?:\.\d+)?)"),
    "stamp": re.compile(r"\btimestamp = (\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})"),
}
_STATES = re.compile(r"\bstates = (\{[^{}]*\})")
_STATE = re.compile(r"'(\w+)': (\d+(?:\.\d+)?)")
_STATE_COLUMNS = {"num_generation_tokens": "tokens_per_s", "num_ctx_tokens": "prompt_tokens_per_s"}


class TrtllmIterLogImporter(Importer):
    name = "tensorrt-llm-iter-log"
    description = "TensorRT-LLM PyTorch backend logs: the executor's per-iteration line (print_iter_log)"

    def recognise(self, head: str) -> Claim | None:
        found = sum(1 for line in head.splitlines() if _ITER.search(line) and _FIELDS["stamp"].search(line))
        return claim(Strength.STATEMENT, found) if found >= 2 else None

    def read(self, source: Source, tz: str | None = None) -> Imported:
        result = Imported()
        iterations: list[dict] = []
        for line in source.lines():
            head = _ITER.search(line)
            stamp = _FIELDS["stamp"].search(line)
            if head is None or stamp is None:
                continue
            iterations.append({"rank": int(head.group(2)), "stamp": stamp.group(1), **_figures(line)})
        if not iterations:
            return result
        frame = pd.DataFrame(iterations)
        lowest = int(frame["rank"].min())
        others = frame["rank"].nunique() - 1
        if others:
            result.warnings.append(
                f"every rank logs its iterations: read global rank {lowest}'s, left out "
                f"{counted(others, 'other rank')}"
            )
        frame = frame[frame["rank"] == lowest]
        frame["ts"] = local_epochs(pd.to_datetime(frame["stamp"], errors="coerce"), tz)
        frame = frame.dropna(subset=["ts"])
        if frame.empty:
            return result
        result.warnings.append(zone_note("TensorRT-LLM iteration times", tz))
        result.tables["server"] = _per_second(frame)
        return result


def _figures(line: str) -> dict[str, float]:
    figures: dict[str, float] = {}
    if scheduled := _FIELDS["scheduled"].search(line):
        figures["running"] = float(scheduled.group(1))
    if kv := _FIELDS["kv"].search(line):
        figures["kv_cache_usage_pct"] = float(kv.group(1)) * 100.0
    if states := _STATES.search(line):
        values = dict(_STATE.findall(states.group(1)))  # Python's repr of a dict of plain counts
        for key, column in _STATE_COLUMNS.items():
            if key in values:
                figures[column] = float(values[key])
    return figures


def _per_second(frame: pd.DataFrame) -> pd.DataFrame:
    """One row for each second that had iterations. A second without any is left out, not zero: the
    executor writes no line while it waits for requests, so a gap is idle time as often as a long step."""
    second = frame["ts"].astype("int64")
    grouped = frame.groupby(second)
    aggregations = {
        column: how
        for column, how in (
            ("running", "max"),
            ("kv_cache_usage_pct", "max"),
            ("tokens_per_s", "sum"),
            ("prompt_tokens_per_s", "sum"),
        )
        if column in frame.columns
    }
    rows = grouped.agg(aggregations).reset_index(names="ts")
    rows["ts"] = rows["ts"].astype(np.float64)
    return rows
