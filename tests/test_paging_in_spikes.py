"""Did the host page while latency spiked? A swap storm of seconds in a long recording."""

from __future__ import annotations

import numpy as np

from diagnose.detect import SignalFindings, SpikeAnalysis
from diagnose.detect.episodes import Episode
from diagnose.detect.signals import Signal
from diagnose.facts.model import Facts
from diagnose.facts.spikes import add_spike_facts

SECONDS = 1200


def _analysis(paging: tuple[int, int], spikes: list[tuple[int, int]]) -> SpikeAnalysis:
    swap = np.zeros(SECONDS)
    swap[paging[0] : paging[1]] = 50 * 2**20  # 50 MiB/s in and out of swap
    latency = np.full(SECONDS, 20.0)
    episodes = [Episode(float(a), float(b), 200.0, 20.0, 1) for a, b in spikes]
    signals = {
        "requests.latency_ms.p50": (
            Signal("requests.latency_ms.p50", "latency", 0.0, 1.0, latency),
            episodes,
        ),
        "system.swap_in_per_s": (Signal("system.swap_in_per_s", "host", 0.0, 1.0, swap), []),
    }
    findings = {name: SignalFindings(signal, [], found, None) for name, (signal, found) in signals.items()}
    return SpikeAnalysis(findings, [], "requests.latency_ms.p50", (0.0, float(SECONDS)))


def _facts(analysis: SpikeAnalysis) -> Facts:
    facts = Facts()
    add_spike_facts(facts, analysis)
    return facts


def test_paging_during_the_spikes_is_found_though_it_fills_two_percent_of_the_time():
    facts = _facts(_analysis(paging=(600, 624), spikes=[(602, 612), (615, 622)]))
    assert facts.get("host.paging_in_spikes_share") == 1.0
    assert facts.get("host.paging_in_spikes_p_value") <= 0.01


def test_paging_at_another_time_than_the_spikes_is_not():
    facts = _facts(_analysis(paging=(100, 124), spikes=[(602, 612), (900, 907)]))
    assert facts.get("host.paging_in_spikes_share") == 0.0
    assert facts.get("host.paging_in_spikes_p_value") == 1.0


def test_paging_all_the_time_is_no_sign_of_the_spikes():
    """Every shift of the spikes catches as much: the share is high, its significance nil."""
    facts = _facts(_analysis(paging=(0, SECONDS), spikes=[(602, 612)]))
    assert facts.get("host.paging_in_spikes_share") == 1.0
    assert facts.get("host.paging_in_spikes_p_value") == 1.0
