"""The offline pipeline in one call: load -> facts -> judge -> report data."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from diagnose.detect import SpikeAnalysis, SpikeSearch, launch
from diagnose.detect.helper import SpikeHelper
from diagnose.dump import load_dump
from diagnose.dump.model import Dump
from diagnose.dump.reader import Progress
from diagnose.facts import add_spike_evidence, compute_facts
from diagnose.judge import default_rules_dir, judge, load_rules
from diagnose.judge.rules import Rule
from diagnose.report import Report, build_report


@dataclass
class Analysis:
    """The report, and the per-signal findings behind it (what a live view plots)."""

    report: Report
    spikes: SpikeAnalysis


def analyse(
    dump_path: str,
    rules_dir: Path | None = None,
    slo_p99_ms: float | None = None,
    tz: str | None = None,
    window_s: float | None = None,
) -> Report:
    """The report of a dump, or of its last ``window_s`` seconds."""
    return analyse_path(dump_path, rules_dir, slo_p99_ms, tz, window_s)[1].report


def analyse_path(
    dump_path: str,
    rules_dir: Path | None = None,
    slo_p99_ms: float | None = None,
    tz: str | None = None,
    window_s: float | None = None,
    helper: subprocess.Popen | bool = True,
    progress: Progress | None = None,
) -> tuple[Dump, Analysis]:
    """The dump as read (and cut to the window) and its analysis: what pictures are drawn from.

    A big dump's spike search is shared with a helper process (detect/helper.py). ``helper``: one the
    caller started early (detect/launch.py); True to start one here if the files are big; False when
    the caller already found them small. Either way one may start once the dump proves big.
    ``progress``: told each step as it starts (what file is read, what is computed).
    """
    process: subprocess.Popen | None
    if isinstance(helper, subprocess.Popen):
        process = helper
    else:
        process = launch.start_for_files(dump_path) if helper else None
    spike_helper = SpikeHelper(process) if process is not None else None
    try:
        rules = load_rules(rules_dir or default_rules_dir())
        dump = load_dump(dump_path, tz=tz, progress=progress)
    except BaseException:
        if spike_helper is not None:
            spike_helper.close()
        raise
    span = dump.span()
    if window_s is not None and span is not None:
        dump = dump.between(span[1] - window_s, span[1])
    return dump, analyse_dump(dump, rules, slo_p99_ms, helper=spike_helper or True, progress=progress)


def analyse_dump(
    dump: Dump,
    rules: list[Rule],
    slo_p99_ms: float | None = None,
    helper: bool | SpikeHelper = False,
    progress: Progress | None = None,
) -> Analysis:
    """``helper``: a big dump's signals may be searched by a second process too (see detect/helper.py);
    True starts one if the dump is big enough, a running one is used (or closed if it is not)."""
    # Damaged evidence overflows and divides by zero; the results are NaN or inf, which every
    # stage treats as missing. numpy's warnings about it would only be noise on the terminal.
    with np.errstate(all="ignore"):
        say = progress or (lambda _: None)
        rows = sum(len(frame) for frame in dump.tables.values())
        say(f"computing the facts of {rows:,} rows")
        search = SpikeSearch(dump, helper=helper)
        facts = compute_facts(dump, slo_p99_ms=slo_p99_ms)  # while a helper searches the first signals
        say("searching the signals for change points and spike episodes")
        spikes = search.finish()
        add_spike_evidence(facts, spikes)
        say(f"judging {len(rules)} rules")
        return Analysis(build_report(dump, facts, judge(rules, facts), spikes), spikes)
