"""The signals a finding's evidence cites: what the timeline draws under the latency, and the live view
charts as "cited", found the same way for both."""

from __future__ import annotations

import re
from collections.abc import Collection

from diagnose.report.model import Hypothesis, Report


def cited_signals(hypothesis: Hypothesis, report: Report, signals: Collection[str]) -> list[str]:
    """Signals the facts behind a hypothesis's evidence came from.

    A fact's value may be a signal's name (``spikes.colocated.signal``); its
    citation may name the signal (``gpu_processes.mem_used_bytes[name=x]:
    episodes ...``) or the file and columns the signal is drawn from
    (``gpu.csv: sm_clock_mhz, ...``).
    """
    table_of = {file: table for table, read in report.evidence.tables.items() for file in read.files}
    cited: list[str] = []
    for line in hypothesis.evidence:
        for fact in (report.facts[name] for name in line.facts if name in report.facts):
            if isinstance(fact.value, str) and fact.value in signals:
                cited.append(fact.value)
            cited += [
                name for name in signals if name in fact.source or _names_column(fact.source, name, table_of)
            ]
    return list(dict.fromkeys(cited))


def _names_column(source: str, signal: str, table_of: dict[str, str]) -> bool:
    """Whether a citation names the file and column a signal is drawn from. A process's signal
    (``processes.cpu_pct[pid=4242]``) is cited only where its process is: a citation of a column of
    the process table names one process, not every process that has the column."""
    file, _, columns = source.partition(":")
    table = table_of.get(file.strip())
    if table is None or not signal.startswith(table + "."):
        return False
    key = signal.partition("[")[2].rstrip("]")
    if key and key.split("=", 1)[-1] not in columns:
        return False
    column = signal[len(table) + 1 :].split("[")[0].split(".")[0]
    return re.search(rf"\b{re.escape(column)}\b", columns) is not None
