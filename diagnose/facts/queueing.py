"""Queueing: is the service near saturation, with queue wait growing like rho / (1 - rho)?

Per window: arrival rate, mean queue wait, and utilisation rho. Where the
server batches, rho is the arrival rate over the best throughput any batch size
reached (a batching GPU reads busy at any load: each batch fills the time it
has); for a text-generation engine, which steps continuously and so keeps the
GPU busy at any load, it is the requests running over the most it runs (its own
gauges); otherwise it is the GPU's busy fraction (mean util_pct / 100); without a
GPU table (a model served on the CPU, or a GPU nobody recorded), it is the
model's busy fraction from the request log: the model stages' time in the
window over the window's length and the number of model workers (the server's
highest `running`, or one where the log's model time never exceeds the wall
time, which more workers would).

Where no request log times a queue stage (a dump pulled from Prometheus, an
engine scraped with no request log), the engine's own gauges give the same
curve: the arrivals are what it completed plus what its queue grew by, and
the wait is its own mean queue time (``server.queue_ms``) or, without one,
Little's law: the mean number waiting over the arrival rate (W = L / λ).
Across
windows: how closely the wait follows rho / (1 - rho) (Spearman), how much it
grew from the quietest to the busiest quarter, and the knee: the lowest
arrival rate at which the wait is twice its quiet level. Operating at about 70 % of the knee leaves headroom.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from diagnose.dump.model import Dump
from diagnose.dump.schema import stage_columns
from diagnose.facts.model import Facts, StageKind
from diagnose.facts.ranks import spearman
from diagnose.facts.stages import declared_kinds, stage_kind
from diagnose.units import counted

_WINDOWS = 20
_MIN_REQUESTS = 30
_MIN_SAMPLES = 3  # engine samples in a window of the gauges' curve


_WAIT_FACTS = ("queue.wait_growth", "queue.knee_rps", "queue.recommended_rps")
_RHO_FACTS = ("queue.rho.max", "queue.rho.p10", "queue.mm1_corr")


@dataclass(frozen=True)
class QueueWindows:
    """Per window with enough requests: arrival rate, mean queue wait and (where known) utilisation."""

    rate_rps: np.ndarray
    wait_ms: np.ndarray
    rho: np.ndarray | None  # NaN in a window without one; None where fewer than 5 windows have one
    rho_how: str  # where rho came from, or why there is none
    source: str


def queue_windows(dump: Dump, capacity: float | None = None) -> QueueWindows | str | None:
    """The queueing curve's points, or why there are none; None without a queue wait to look at.

    ``capacity``: the batch facts' best items per second, where the server batches.
    """
    requests, gpu = dump.table("requests"), dump.table("gpu")
    if requests is None or "stage_queue_ms" not in requests.columns:
        return _server_windows(dump)
    if len(requests) < _WINDOWS * _MIN_REQUESTS:
        return (
            f"more requests: the queueing curve needs {_WINDOWS * _MIN_REQUESTS:,} "
            f"({dump.source('requests')} has {len(requests):,})"
        )
    ts = requests["ts"].to_numpy()
    edges = np.linspace(ts[0], ts[-1] + 1e-6, _WINDOWS + 1)
    window = np.clip(np.searchsorted(edges, ts, side="right") - 1, 0, _WINDOWS - 1)
    frame = pd.DataFrame({"w": window, "queue": requests["stage_queue_ms"].to_numpy(dtype="float64")})
    per = frame.groupby("w")["queue"].agg(["mean", "size"])
    per = per[per["size"] >= _MIN_REQUESTS]
    if len(per) < 5:
        return f"5 windows of {_MIN_REQUESTS} requests or more ({dump.source('requests')} has {len(per)})"
    # a sample's windows hold 1 in N of the requests that arrived (dump/sample.py)
    rate = per["size"].to_numpy() * dump.requests_per_row() / np.diff(edges)[per.index.to_numpy()]
    wait = per["mean"].to_numpy()
    source = f"{dump.source('requests')}: stage_queue_ms and arrivals per window ({len(per)} windows)"
    if isinstance(capacity, float) and capacity > 0:
        rho = (rate / capacity).clip(0, 0.99)
        return QueueWindows(rate, wait, rho, f"batch capacity {capacity:,.1f}/s", source)
    if gpu is None or "util_pct" not in gpu.columns:
        model = _model_busy(dump, requests, window, per.index.to_numpy(), np.diff(edges))
        if isinstance(model, str):
            how = (
                "a utilisation to set against the queue wait: gpu: util_pct, or requests: batch_size with "
                f"stage_forward_ms (the queue wait itself is there; {model})"
            )
            return QueueWindows(rate, wait, None, how, source)
        return QueueWindows(rate, wait, model[0], model[1], source)
    engine = dump.table("server")
    # A text-generation engine steps continuously: the GPU reads busy at any load, and is no measure
    # of how loaded the engine is. Its own gauges are: requests running over the most it runs.
    loaded = (
        _engine_rho(engine, edges, per.index.to_numpy(), dump.source("server"))
        if engine is not None
        else None
    )
    if loaded is not None:
        return QueueWindows(rate, wait, loaded[0], loaded[1], source)
    gpu_window = np.clip(np.searchsorted(edges, gpu["ts"].to_numpy(), side="right") - 1, 0, _WINDOWS - 1)
    util = pd.Series(gpu["util_pct"].to_numpy(dtype="float64")).groupby(gpu_window).mean()
    rho = (util.reindex(per.index).to_numpy() / 100).clip(0, 0.99)
    known = np.isfinite(rho)
    if known.sum() < 5:
        how = f"gpu: util_pct in 5 of the request windows ({int(known.sum())} have it)"
        return QueueWindows(rate, wait, None, how, source)
    return QueueWindows(rate, wait, rho, f"{dump.source('gpu')}: util_pct", source)


def _server_windows(dump: Dump) -> QueueWindows | str | None:
    """The curve from the engine's gauges (queue depth, completions, its own queue time), or why not."""
    server = dump.table("server")
    if server is None or not {"queue_depth", "throughput_rps"} <= set(server.columns):
        return None
    ts = pd.to_numeric(server["ts"], errors="coerce").to_numpy(dtype="float64")
    waiting = pd.to_numeric(server["queue_depth"], errors="coerce").to_numpy(dtype="float64")
    done = pd.to_numeric(server["throughput_rps"], errors="coerce").to_numpy(dtype="float64")
    known = np.isfinite(ts) & np.isfinite(waiting) & np.isfinite(done)
    if known.sum() < _WINDOWS * _MIN_SAMPLES:
        return (
            f"more engine samples: the queueing curve from {dump.source('server')} needs "
            f"{_WINDOWS * _MIN_SAMPLES} with queue_depth and throughput_rps ({int(known.sum())} have both)"
        )
    ts, waiting, done = ts[known], waiting[known], done[known]
    edges = np.linspace(ts[0], ts[-1] + 1e-6, _WINDOWS + 1)
    window = np.clip(np.searchsorted(edges, ts, side="right") - 1, 0, _WINDOWS - 1)
    frame = pd.DataFrame({"w": window, "ts": ts, "waiting": waiting, "done": done})
    own = None
    if "queue_ms" in server.columns:
        own = pd.to_numeric(server["queue_ms"], errors="coerce").to_numpy(dtype="float64")[known]
        frame["own"] = own
    grouped = frame.groupby("w")
    per = grouped.agg(
        n=("ts", "size"), first=("waiting", "first"), last=("waiting", "last"),
        mean_waiting=("waiting", "mean"), done=("done", "mean"),
    )  # fmt: skip
    per["span"] = grouped["ts"].max() - grouped["ts"].min()
    per = per[per["n"] >= _MIN_SAMPLES]
    # Arrivals: what was completed, plus what the queue grew by over the window.
    rate = (per["done"] + (per["last"] - per["first"]) / per["span"].where(per["span"] > 0)).to_numpy()
    rate = np.where(np.isfinite(rate), np.maximum(rate, 0.0), per["done"].to_numpy())
    source = dump.source("server")
    use_own = own is not None and np.isfinite(own).sum() >= _WINDOWS * _MIN_SAMPLES // 2
    if use_own:
        wait = frame.groupby("w")["own"].mean().reindex(per.index).to_numpy()
        how = f"{source}: queue_ms (the engine's own mean queue time) and arrivals per window"
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            wait = np.where(rate > 0, per["mean_waiting"].to_numpy() / rate * 1000.0, np.nan)
        how = f"{source}: queue_depth over the arrival rate per window (Little's law, W = L / λ)"
    good = np.isfinite(wait) & (rate > 0)
    if good.sum() < 5:
        return f"5 windows with engine samples and arrivals ({source} has {int(good.sum())})"
    rate, wait, index = rate[good], wait[good], per.index.to_numpy()[good]
    source = f"{how} ({good.sum()} windows)"
    rho = _engine_rho(server, edges, index, dump.source("server"))
    if rho is not None:
        return QueueWindows(rate, wait, rho[0], rho[1], source)
    gpu = dump.table("gpu")
    if gpu is not None and "util_pct" in gpu.columns and "tokens_per_s" not in server.columns:
        slots = np.clip(np.searchsorted(edges, gpu["ts"].to_numpy(), side="right") - 1, 0, _WINDOWS - 1)
        util = pd.Series(gpu["util_pct"].to_numpy(dtype="float64")).groupby(slots).mean()
        values = (util.reindex(index).to_numpy() / 100).clip(0, 0.99)
        if np.isfinite(values).sum() >= 5:
            return QueueWindows(rate, wait, values, f"{dump.source('gpu')}: util_pct", source)
    how = "a utilisation to set against the queue wait: the engine's running gauge, or gpu: util_pct"
    return QueueWindows(rate, wait, None, how, source)


def _engine_rho(
    server: pd.DataFrame, edges: np.ndarray, windows: np.ndarray, source: str
) -> tuple[np.ndarray, str] | None:
    """Per window, a text-generation engine's requests running over the most it runs: its load."""
    if not {"running", "tokens_per_s"} <= set(server.columns):
        return None
    running = pd.to_numeric(server["running"], errors="coerce").to_numpy(dtype="float64")
    ceiling = np.nanmax(running) if np.isfinite(running).any() else 0.0
    if ceiling <= 0:
        return None
    slots = np.clip(np.searchsorted(edges, server["ts"].to_numpy(), side="right") - 1, 0, _WINDOWS - 1)
    busy = pd.Series(running / ceiling).groupby(slots).mean()
    rho = busy.reindex(windows).to_numpy().clip(0, 0.99)
    if np.isfinite(rho).sum() < 5:
        return None
    return rho, f"{source}: running over its highest ({ceiling:.0f})"


RECOMMENDED = 0.7  # of the knee: the rate to run at, with room for bursts


def knee_of(found: QueueWindows) -> float | None:
    """The arrival rate at which the queue wait first doubles the quietest quarter's, or None."""
    rate, wait = found.rate_rps, found.wait_ms
    quiet = wait[rate <= np.percentile(rate, 25)].mean()
    bent = np.flatnonzero(wait >= 2 * quiet)
    return float(np.sort(rate[bent])[0]) if bent.size else None


def add_queue_facts(facts: Facts, dump: Dump) -> None:
    found = queue_windows(dump, facts.number("batch.capacity_items_per_s"))
    if found is None:
        return
    if isinstance(found, str):
        facts.cannot([*_WAIT_FACTS, *_RHO_FACTS], found)
        return
    rate, wait, source = found.rate_rps, found.wait_ms, found.source
    quiet = wait[rate <= np.percentile(rate, 25)].mean()
    busy = wait[rate >= np.percentile(rate, 75)].mean()
    if quiet > 0:
        facts.add("queue.wait_growth", float(busy / quiet), source)
    bent = knee_of(found)
    if bent is not None:
        facts.add("queue.knee_rps", bent, source)
        facts.add("queue.recommended_rps", RECOMMENDED * bent, source)
    if found.rho is None:
        facts.cannot(_RHO_FACTS, found.rho_how)
        return
    known = np.isfinite(found.rho)
    _add_rho_facts(facts, found.rho[known], wait[known], f"{source} and {found.rho_how}")


def _model_busy(
    dump: Dump, requests: pd.DataFrame, window: np.ndarray, windows: np.ndarray, lengths_s: np.ndarray
) -> tuple[np.ndarray, str] | str:
    """Per window, the share of time the model's worker(s) were busy, from the request log; or why not."""
    declared = declared_kinds(dump.manifest.extra, [])  # its warnings are said once, by the stage facts
    stages = stage_columns(requests)
    model = [column for name, column in stages.items() if stage_kind(name, declared) == StageKind.GPU]
    if not model:
        return "the request log has no model stage such as stage_forward_ms either"
    if {"ttft_ms", "tpot_ms"} & set(requests.columns) or "decode" in stages:
        return "a text-generation engine's requests share its steps, so their model times overlap"
    busy_ms = requests[model].apply(pd.to_numeric, errors="coerce").fillna(0.0).sum(axis=1).to_numpy()
    per_window = pd.Series(busy_ms).groupby(window).sum().reindex(windows).to_numpy()
    per_window = per_window * dump.requests_per_row()  # a sample: 1 in N of the requests
    load = per_window / (lengths_s[windows] * 1000)
    stage_names = ", ".join(model)
    workers = _workers(dump.table("server"))
    if workers is not None:
        how = f"{stage_names} over {counted(workers, 'worker')} ({dump.source('server')}: highest running)"
        return (load / workers).clip(0, 0.99), how
    if np.nanmax(load) > 1.05:
        return (
            f"the model's time exceeds the wall time ({np.nanmax(load):.1f}x in one window), so it runs "
            "on several workers or in batches, and how many is not recorded (server: running)"
        )
    how = f"{stage_names}: one model worker (the model's time never exceeds the wall time)"
    return load.clip(0, 0.99), how


def _workers(server: pd.DataFrame | None) -> float | None:
    if server is None or "running" not in server.columns:
        return None
    running = pd.to_numeric(server["running"], errors="coerce").to_numpy(dtype="float64")
    highest = np.nanmax(running) if np.isfinite(running).any() else np.nan
    return float(highest) if highest >= 1 else None


def _add_rho_facts(facts: Facts, rho: np.ndarray, wait: np.ndarray, cite: str) -> None:
    facts.add("queue.rho.max", float(np.max(rho)), cite)
    facts.add("queue.rho.p10", float(np.percentile(rho, 10)), cite)
    facts.add("queue.mm1_corr", spearman(rho / (1 - rho), wait), cite)
