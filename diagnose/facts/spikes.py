"""Facts from the spike analysis: latency episodes, their period, and what moves with them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from diagnose.detect import Signal, SignalFindings, SpikeAnalysis
from diagnose.detect.alignment import LOCK_WIDTH_S, MAX_LAG_S, SHIFTS, Alignment
from diagnose.dump.processes import group_label
from diagnose.facts.host_memory import PAGING_BYTES_PER_S
from diagnose.facts.model import Facts
from diagnose.units import human_bytes

_THROUGHPUT = "requests.throughput_rps"
_PAGING = ("system.swap_in_per_s", "system.swap_out_per_s")
_CONTENDER_LATENCY = ("requests.latency_ms.p50", "requests.latency_ms.p99")
MIN_CONTENDING_CPU_PCT = 10.0  # a tenth of one core: see _contender


def add_spike_facts(facts: Facts, analysis: SpikeAnalysis) -> None:
    _add_contender(facts, analysis)
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
    change = _mean_ratio(throughput.signal, spikes)
    cite = f"{_THROUGHPUT} inside and outside the latency episodes"
    if change is not None:
        facts.add("spikes.throughput.change", change, cite)
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
    inside = _covered(first.times(), spikes)
    if not inside.any() or inside.all():
        return
    observed = int(paging[inside].sum())
    cite = f"{', '.join(s.name for s in signals)} inside the latency episodes of {analysis.reference}"
    facts.add("host.paging_in_spikes_share", observed / int(inside.sum()), cite)
    facts.add("host.paging_in_spikes_p_value", _shifted_p_value(paging, inside, observed, first.step), cite)


def _shifted_p_value(paging: np.ndarray, inside: np.ndarray, observed: int, step: float) -> float:
    """Share of circular shifts of ``inside`` (beyond the alignment's lag search) that catch at least
    ``observed`` paging samples."""
    offsets = _offsets(inside.size, step)
    if offsets is None or observed == 0:
        return 1.0
    caught = _shifted_sums(paging.astype("float64"), inside, offsets)
    return float((1 + np.sum(caught >= observed)) / (1 + SHIFTS))


def _offsets(n: int, step: float) -> np.ndarray | None:
    """The circular shifts of the null, in samples: none shorter than the alignment's lag search, which
    would only move a lag, not break a link (None when the series is too short for any)."""
    shortest = int(np.ceil(2 * (MAX_LAG_S + LOCK_WIDTH_S) / step))
    if n <= 2 * shortest:
        return None
    return np.random.default_rng(0).integers(shortest, n - shortest, SHIFTS)


_MIN_SHIFTS = 99  # fewer shifts than this off a schedule: keep them all (p cannot go below 0.01)


def _off_schedule(offsets: np.ndarray, found: SignalFindings, runs: list, step: float) -> np.ndarray:
    """The shifts of the null for a process whose runs keep a schedule: those that land its runs at
    another phase of the schedule. A shift by about a whole number of periods puts a periodic job's runs
    back where they were, so it is no "random time", and a null made of such shifts would credit the
    job's own regularity to chance (a cron job every 100 s, 15 s long: 3 shifts in 10 do that)."""
    period = found.periodicity
    if period is None or not period.periodic or period.period_s <= 0:
        return offsets
    every = period.period_s / step
    margin = (float(np.median([e.duration for e in runs])) + period.jitter_s) / step
    phase = np.mod(offsets, every)
    kept = offsets[np.minimum(phase, every - phase) > margin]
    return kept if kept.size >= _MIN_SHIFTS else offsets


def _shifted_sums(values: np.ndarray, inside: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Per offset, the sum of ``values`` over the runs of ``inside`` shifted round the circle, read
    from cumulative sums: no copy of the series per shift."""
    n = inside.size
    edges = np.flatnonzero(np.diff(np.concatenate(([0], inside.astype(np.int8), [0]))))
    starts, ends = edges[::2], edges[1::2]
    counted = np.concatenate(([0.0], np.cumsum(np.concatenate((values, values)))))  # the circle, twice
    lo = (starts[None, :] + offsets[:, None]) % n
    return (counted[lo + (ends - starts)[None, :]] - counted[lo]).sum(axis=1)


def _add_contender(facts: Facts, analysis: SpikeAnalysis) -> None:
    """Is latency higher while another process runs? Asked of each contending process's own episodes.

    The alignment (above) starts from the latency episodes, which the search finds only where latency
    stands well clear of its noise: a job that doubles the median of a sparse, noisy latency series
    makes episodes in some of its runs and not others, at lags that vary. A job's own episodes (a
    core's worth of CPU, gigabytes of GPU memory) stand clear of theirs. So the question is also
    asked the other way round: over the windows of the per-window P50, is latency higher inside the
    process's episodes than outside, beyond what its runs at random times would give (the same
    circular shifts; the best of several processes corrected by their number, Holm)? And is
    traffic higher then too (a load surge that both the process and latency follow)? The median per
    window, not the tail, is compared: a contended core slows every request.
    """
    chosen = contender(analysis)
    if chosen is None:
        return
    name, found, runs, tested = chosen.latency, chosen.found, chosen.runs, chosen.tested
    p_value, log_ratio = chosen.p_value, -chosen.during
    meta = found.signal.meta
    cite = (
        f"{name} inside and outside the episodes of {found.signal.name}; p {p_value:.3g} "
        f"against {SHIFTS} circular shifts, x {tested} processes tested (Holm)"
    )
    facts.add("spikes.contender.process", _who(meta), cite)
    facts.add("spikes.contender.cmdline", meta["cmdline"] or meta["name"], cite)
    facts.add("spikes.contender.runs", len(runs), cite)
    facts.add("spikes.contender.latency_ratio", float(np.exp(-log_ratio)), cite)
    facts.add("spikes.contender.p_value", min(1.0, p_value * tested), cite)
    worse = _runs_worse(chosen.logs, chosen.valid, chosen.times, runs)
    if worse is not None:
        facts.add(
            "spikes.contender.runs_worse_share",
            worse,
            f"{name} inside each episode of {found.signal.name} against outside them all "
            f"({_RUN_WORSE:g}x or more)",
        )
    if found.periodicity is not None:
        period = found.periodicity
        cite_period = f"{found.signal.name}: gaps between {period.occurrences} episode starts"
        facts.add("spikes.contender.periodic", period.periodic, cite_period)
        facts.add("spikes.contender.period_s", period.period_s, cite_period)
        facts.add("spikes.contender.period_p_value", period.p_value, cite_period)
    throughput = analysis.findings.get(_THROUGHPUT)
    change = _mean_ratio(throughput.signal, runs) if throughput is not None else None
    if change is not None:
        facts.add(
            "spikes.contender.throughput_ratio",
            change,
            f"{_THROUGHPUT} inside and outside the episodes of {found.signal.name}",
        )


@dataclass(frozen=True)
class Contender:
    """The contending process the facts name, and the latency series it was judged on."""

    latency: str  # the latency signal's name
    logs: np.ndarray  # its log values, ``valid`` where finite, at ``times``
    valid: np.ndarray
    times: np.ndarray
    found: SignalFindings  # the process's signal and episodes
    runs: list  # its episodes above its baseline
    p_value: float  # before the correction for the processes tested
    during: float  # mean log latency inside its runs less outside
    tested: int  # contending processes tested


def contender(analysis: SpikeAnalysis) -> Contender | None:
    """Of the contending processes, the most significant (the facts name it, and the expected gain sets
    its runs aside); None where none could be tested."""
    name = next((n for n in _CONTENDER_LATENCY if n in analysis.findings), None)
    if name is None:
        return None
    latency = analysis.findings[name].signal
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = np.log(np.where(latency.values > 0, latency.values, np.nan))
    valid = np.isfinite(logs)
    offsets = _offsets(logs.size, latency.step)
    if offsets is None:
        return None
    times = latency.times()
    tested = []
    for found in analysis.findings.values():
        runs = [e for e in found.episodes if e.direction > 0]
        if len(runs) < 2 or not _contender(found):
            continue
        inside = _covered(times, runs)
        if (inside & valid).sum() < 3 or (~inside & valid).sum() < 3:
            continue
        during = float(_mean_inside(logs, valid, inside, None))
        null = _off_schedule(offsets, found, runs, latency.step)
        shifted = _mean_inside(logs, valid, inside, null)
        p_value = float((1 + np.sum(shifted >= during)) / (1 + null.size))
        tested.append((p_value, -during, found, runs))
    if not tested:
        return None
    p_value, negative, found, runs = min(tested, key=lambda t: t[:2])
    return Contender(name, logs, valid, times, found, runs, p_value, -negative, len(tested))


_RUN_WORSE = 1.25  # a run during which the median latency is a quarter higher than outside every run


def _runs_worse(logs: np.ndarray, valid: np.ndarray, times: np.ndarray, runs: list) -> float | None:
    """The share of a process's runs during which latency was at least 1.25x what it is outside them
    all: near 1 when every run of it coincides with worse latency, whatever its average says."""
    outside = ~_covered(times, runs) & valid
    if outside.sum() < 3:
        return None
    baseline = float(np.mean(logs[outside]))
    worse, judged = 0, 0
    for run in runs:
        inside = _covered(times, [run]) & valid
        if inside.any():
            judged += 1
            worse += float(np.mean(logs[inside])) - baseline >= np.log(_RUN_WORSE)
    return worse / judged if judged else None


def _mean_ratio(signal: Signal, episodes: list) -> float | None:
    """A signal's mean inside the episodes over its mean outside them (None where either is missing)."""
    inside = _covered(signal.times(), episodes)
    during, rest = np.nanmean(signal.values[inside]), np.nanmean(signal.values[~inside])
    return float(during / rest) if rest > 0 and np.isfinite(during) else None


def _covered(times: np.ndarray, episodes: list) -> np.ndarray:
    """Which of the sorted ``times`` fall in some episode [start, end): one pass, however many episodes."""
    marks = np.zeros(times.size + 1, dtype="int64")
    np.add.at(marks, np.searchsorted(times, [e.start for e in episodes]), 1)
    np.add.at(marks, np.searchsorted(times, [e.end for e in episodes]), -1)
    return np.cumsum(marks[:-1]) > 0


def _mean_inside(
    logs: np.ndarray, valid: np.ndarray, inside: np.ndarray, offsets: np.ndarray | None
) -> np.ndarray:
    """Mean of ``logs`` inside less mean outside: for ``inside`` itself (offsets None) or for each
    circular shift of it."""
    values = np.where(valid, logs, 0.0)
    weights = valid.astype("float64")
    if offsets is None:
        sums, counts = values[inside].sum(), weights[inside].sum()
    else:
        sums, counts = _shifted_sums(values, inside, offsets), _shifted_sums(weights, inside, offsets)
    total, count = values.sum(), weights.sum()
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.nan_to_num(sums / counts - (total - sums) / (count - counts), nan=-np.inf)


def _who(meta: dict) -> str:
    """A process's label: its group, its pid, or its pids."""
    pids = meta["pids"]
    if "group" in meta:
        return group_label(meta["group"])
    return f"pid {pids[0]}" if len(pids) == 1 else f"pids {', '.join(str(p) for p in pids)}"


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
    facts.add("spikes.colocated.process", _who(meta), cite)
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
