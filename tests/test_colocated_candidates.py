"""Which other process is named as the co-located job: one that could take something from the server."""

from __future__ import annotations

import numpy as np

from diagnose.detect import SignalFindings, SpikeAnalysis
from diagnose.detect.alignment import Alignment
from diagnose.detect.episodes import Episode
from diagnose.detect.signals import Signal
from diagnose.facts.model import Facts
from diagnose.facts.spikes import add_spike_facts

REFERENCE = "requests.latency_ms.p50"


def _process(name: str, pid: int, rise: float) -> SignalFindings:
    meta = {"pids": [pid], "name": name, "cmdline": name, "server": False}
    signal = Signal(f"processes.cpu_pct[pid={pid}]", "process", 0.0, 1.0, np.zeros(600), meta)
    return SignalFindings(signal, [], [Episode(100.0, 120.0, 5.0 + rise, 5.0, 1)], None)


def _analysis(alignments: list[Alignment], *processes: SignalFindings) -> SpikeAnalysis:
    latency = Signal(REFERENCE, "latency", 0.0, 1.0, np.full(600, 20.0))
    spikes = [Episode(100.0, 120.0, 60.0, 20.0, 1), Episode(400.0, 420.0, 60.0, 20.0, 1)]
    findings = {REFERENCE: SignalFindings(latency, [], spikes, None)}
    findings |= {p.signal.name: p for p in processes}
    return SpikeAnalysis(findings, alignments, REFERENCE, (0.0, 600.0))


def _aligned(pid: int, p_value: float) -> Alignment:
    return Alignment(REFERENCE, f"processes.cpu_pct[pid={pid}]", 1.0, 1.0, 2.0, p_value, 2)


def test_a_process_that_adds_a_percent_of_a_core_is_not_the_co_located_job():
    """The kernel's memory monitor reacting to the job moved with the spikes best, and was named."""
    facts = Facts()
    add_spike_facts(
        facts,
        _analysis(
            [_aligned(81, 0.001), _aligned(4242, 0.004)],
            _process("kdamond.0", 81, 1.0),
            _process("job", 4242, 150.0),
        ),
    )
    assert facts.get("spikes.colocated.name") == "job"
    assert facts.get("spikes.colocated.cpu_rise_pct") == 150.0
    assert facts.get("spikes.colocated.p_value") == 0.004  # one contender tried: no correction for kdamond


def test_only_negligible_processes_moving_means_no_co_located_job():
    facts = Facts()
    add_spike_facts(facts, _analysis([_aligned(81, 0.001)], _process("kdamond.0", 81, 1.0)))
    assert facts.get("spikes.colocated.name") is None
    assert facts.get("spikes.colocated.p_value") == 1.0
