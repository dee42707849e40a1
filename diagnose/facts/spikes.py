"""Facts from the spike analysis: latency episodes, their period, and what moves with them."""

from __future__ import annotations

import numpy as np

from diagnose.detect import SignalFindings, SpikeAnalysis
from diagnose.detect.alignment import LOCK_WIDTH_S, MAX_LAG_S, SHIFTS, Alignment
from diagnose.dump.processes import group_label
from diagnose.facts.host_memory import PAGING_BYTES_PER_S
from diagnose.facts.model import Facts
from diagnose.units import human_bytes

_THROUGHPUT = "requests.throughput_rps"
_PAGING = ("system.swap_in_per_s", "system.swap_out_per_s")
MIN_CONTENDING_CPU_PCT = 10.0  # a tenth of one core: see _contender


def add_spike_facts(facts: Facts, analysis: SpikeAnalysis) -> None:
    reference = analysis.reference
    if reference is None:
        if any(name.startswith("requests.latency_ms") for name in analysis.findings):
            facts.add("spikes.latency.episodes", 0, "requests: per-window latency, no episodes found")
        return
    found = analysis.findings[reference]
    spikes = [e for e in found.episodes if e.direction > 0]
    cite = f"{reference}: episodes (ruptures KernelCPD, noise-scaled penalty)"
    facts.add("spikes.latency.episodes", len(spikes), cite)
    facts.add("spikes.latency.episode_s", float(np.median([e.duration for e in spikes])), cite)
    ratios = [e.peak / e.baseline for e in spikes if e.baseline > 0]
    facts.add("spikes.latency.peak_ratio", float(np.median(ratios)) if ratios else None, cite)
    period = found.periodicity
    if period is not None:
        cite_period = f"{reference}: gaps between {period.occurrences} episode starts"
        facts.add("spikes.latency.periodic", period.periodic, cite_period)
        facts.add("spikes.latency.period_s", period.period_s, cite_period)
        facts.add("spikes.latency.period_jitter_s", period.jitter_s, cite_period)
        facts.add("spikes.latency.period_p_value", period.p_value, cite_period)
    _add_throughput(facts, analysis, spikes)
    _add_paging(facts, analysis, spikes)
    colocated = _colocated(analysis)
    if colocated is not None:
        _add_colocated(facts, analysis, colocated)
    elif any(
        f.signal.kind == "process" and not f.signal.meta.get("server") for f in analysis.findings.values()
    ):
        cite = (
            "processes/gpu_processes: no other process that rose by a tenth of a core or more (or in GPU "
            "memory) had episodes overlapping the latency episodes"
        )
        facts.add("spikes.colocated.coincidence", 0.0, cite)
        facts.add("spikes.colocated.locked", 0.0, cite)
        facts.add("spikes.colocated.p_value", 1.0, cite)


def _add_throughput(facts: Facts, analysis: SpikeAnalysis, spikes: list) -> None:
    throughput = analysis.findings.get(_THROUGHPUT)
    if throughput is None:
        return
    signal = throughput.signal
    times = signal.times()
    inside = np.zeros(times.size, dtype=bool)
    for episode in spikes:
        inside |= (times >= episode.start) & (times < episode.end)
    values = signal.values
    during, rest = np.nanmean(values[inside]), np.nanmean(values[~inside])
    cite = f"{_THROUGHPUT} inside and outside the latency episodes"
    if rest > 0 and np.isfinite(during):
        facts.add("spikes.throughput.change", float(during / rest), cite)
    match = next((a for a in analysis.alignments if a.b == _THROUGHPUT), None)
    facts.add("spikes.throughput.coincidence", match.coincidence if match else 0.0, cite)


def _add_paging(facts: Facts, analysis: SpikeAnalysis, spikes: list) -> None:
    """Did the host page while latency spiked? A swap storm can last seconds of a long recording (too
    few for a share of the time to say much) and still make the worst latency of it.

    The share of the episodes' seconds with swap traffic, and its significance by the alignment's null
    (detect/alignment.py): the episodes shifted around the recording by random offsets, which keeps
    their number and lengths but breaks any link in time with the paging.
    """
    signals = [analysis.findings[name].signal for name in _PAGING if name in analysis.findings]
    if not signals:
        return
    first = signals[0]
    traffic = sum(
        np.nan_to_num(s.values)
        for s in signals
        if (s.start, s.step, s.values.size) == (first.start, first.step, first.values.size)
    )
    paging = traffic >= PAGING_BYTES_PER_S
    times = first.times()
    inside = np.zeros(times.size, dtype=bool)
    for episode in spikes:
        inside |= (times >= episode.start) & (times < episode.end)
    if not inside.any() or inside.all():
        return
    observed = int(paging[inside].sum())
    cite = f"{', '.join(s.name for s in signals)} inside the latency episodes of {analysis.reference}"
    facts.add("host.paging_in_spikes_share", observed / int(inside.sum()), cite)
    facts.add("host.paging_in_spikes_p_value", _shifted_p_value(paging, inside, observed, first.step), cite)


def _shifted_p_value(paging: np.ndarray, inside: np.ndarray, observed: int, step: float) -> float:
    """Share of circular shifts of ``inside`` (beyond the alignment's lag search) that catch at least
    ``observed`` paging samples, counted from cumulative sums: no copy of the series per shift."""
    n = inside.size
    shortest = int(np.ceil(2 * (MAX_LAG_S + LOCK_WIDTH_S) / step))
    if n <= 2 * shortest or observed == 0:
        return 1.0
    edges = np.flatnonzero(np.diff(np.concatenate(([0], inside.astype(np.int8), [0]))))
    starts, ends = edges[::2], edges[1::2]
    offsets = np.random.default_rng(0).integers(shortest, n - shortest, SHIFTS)
    counted = np.concatenate(([0], np.cumsum(np.concatenate((paging, paging)))))  # the circle, twice
    lo = (starts[None, :] + offsets[:, None]) % n
    caught = (counted[lo + (ends - starts)[None, :]] - counted[lo]).sum(axis=1)
    return float((1 + np.sum(caught >= observed)) / (1 + SHIFTS))


def _contender(found: SignalFindings) -> bool:
    """A process other than the server that rises enough in its episodes to take something from it.

    A few percent of one core cannot take a core away. On a real host such processes move with a
    spike by chance now and then (the testbed's VM: the kernel's kdamond, +1 %, reacting to the
    co-located job's memory, and chosen over the job itself; its init agent, +1 %; the shell driving
    it, +2 %), and among dozens one passes the alignment test; they are not candidates, and are not
    counted as tries. GPU memory is not held to a floor: any co-tenant's memory is taken from the server's.
    """
    signal = found.signal
    if signal.kind != "process" or signal.meta.get("server"):
        return False
    if ".mem_used_bytes" in signal.name:
        return True
    rise = _median_rise(found)
    return rise is not None and rise >= MIN_CONTENDING_CPU_PCT


def _median_rise(found: SignalFindings) -> float | None:
    rises = [e.peak - e.baseline for e in found.episodes if e.direction > 0]
    return float(np.median(rises)) if rises else None


def _colocated(analysis: SpikeAnalysis) -> Alignment | None:
    """The best-aligned signal of a process other than the server that could contend with it."""
    for alignment in analysis.alignments:
        if _contender(analysis.findings[alignment.b]):
            return alignment
    return None


def _add_colocated(facts: Facts, analysis: SpikeAnalysis, alignment: Alignment) -> None:
    found = analysis.findings[alignment.b]
    meta = found.signal.meta
    # The best of several processes' alignments is chosen: its chance is that of the best of as many
    # tries, so its p-value is multiplied by their number (Holm's correction for the smallest p).
    tried = sum(1 for f in analysis.findings.values() if f.episodes and _contender(f))
    p_value = min(1.0, alignment.p_value * max(tried, 1))
    cite = f"{alignment.b}: episodes against {alignment.a}, {SHIFTS} circular shifts"
    facts.add("spikes.colocated.signal", alignment.b, cite)
    pids = meta["pids"]
    if pids:
        facts.add("spikes.colocated.pid", ", ".join(str(p) for p in pids), cite)
    if "group" in meta:
        who = group_label(meta["group"])
    else:
        who = f"pid {pids[0]}" if len(pids) == 1 else f"pids {', '.join(str(p) for p in pids)}"
    facts.add("spikes.colocated.process", who, cite)
    facts.add("spikes.colocated.name", meta["name"], cite)
    facts.add("spikes.colocated.cmdline", meta["cmdline"] or meta["name"], cite)
    facts.add("spikes.colocated.coincidence", alignment.coincidence, cite)
    facts.add("spikes.colocated.locked", alignment.locked, cite)
    facts.add(
        "spikes.colocated.p_value",
        p_value,
        f"{cite}; p {alignment.p_value:.3g} for this signal, x {tried} other-process signals with episodes "
        "(Holm)",
    )
    facts.add("spikes.colocated.lag_s", alignment.lag_s, cite)
    rise = _median_rise(found)
    if rise is not None:
        if ".mem_used_bytes" in alignment.b:
            footprint = f"+{human_bytes(rise)} of GPU memory"
        else:
            metric = "busiest-thread CPU" if "max_thread" in alignment.b else "CPU"
            footprint = f"+{rise:.0f}% of a core of {metric}"
            facts.add("spikes.colocated.cpu_rise_pct", rise, f"{alignment.b}: median episode peak - baseline")
        facts.add("spikes.colocated.footprint", footprint, f"{alignment.b}: median episode peak - baseline")
