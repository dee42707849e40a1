"""The helper process: what it finds is what this process would have found, and its failures cost nothing."""

from __future__ import annotations

import io
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import diagnose.detect.helper as helper_module
import diagnose.detect.launch as launch_module
from diagnose.detect.episodes import Episode
from diagnose.detect.helper import (
    SignalQueue,
    SpikeHelper,
    decode_findings,
    encode_findings,
    read_signal,
    write_signal,
)
from diagnose.detect.periodicity import Periodicity
from diagnose.detect.search import SignalFindings
from diagnose.detect.signals import Signal
from diagnose.dump import load_dump
from diagnose.judge import default_rules_dir, load_rules
from diagnose.pipeline import analyse_dump
from diagnose.processes import beside
from diagnose.report import render_json

DUMPS = Path(__file__).resolve().parents[1] / "fixtures" / "dumps"
FIXTURE = DUMPS / "co-located-contention"  # periodic episodes in several signals, and alignments


def _signal(values, name="gpu.util_pct[gpu=0]") -> Signal:
    return Signal(name, "gpu", 1_764_460_800.5, 1.0, np.asarray(values, dtype=float))


def test_a_signal_crosses_the_pipe_unchanged():
    stream = io.BytesIO()
    sent = [_signal([1.0, np.nan, -3.25, 1e300]), _signal([], name="empty")]
    for signal in sent:
        write_signal(stream, signal)
    stream.seek(0)
    for signal in sent:
        got = read_signal(stream)
        assert (got.name, got.kind, got.start, got.step) == (
            signal.name,
            signal.kind,
            signal.start,
            signal.step,
        )
        np.testing.assert_array_equal(got.values, signal.values)
    assert read_signal(stream) is None


def test_a_signal_cut_short_reads_as_the_end():
    stream = io.BytesIO()
    write_signal(stream, _signal(np.arange(10.0)))
    stream = io.BytesIO(stream.getvalue()[:-3])
    assert read_signal(stream) is None


def test_findings_cross_the_pipe_exactly():
    signal = _signal([0.0] * 5)
    found = SignalFindings(
        signal,
        [1_764_460_900.1234567],
        [Episode(1.1, 2.2, float("nan"), 1 / 3, -1), Episode(5.0, 9.0, 7.5, 2.0, 1)],
        Periodicity(300.00000001, 2.5, 7, 0.001),
    )
    back = decode_findings(json.loads(json.dumps(encode_findings(found))), signal)
    assert back.change_points == found.change_points
    assert back.periodicity == found.periodicity
    assert math.isnan(back.episodes[0].peak)
    assert back.episodes[0].baseline == 1 / 3 and back.episodes[1] == found.episodes[1]
    empty = SignalFindings(signal, [], [], None)
    assert decode_findings(json.loads(json.dumps(encode_findings(empty))), signal) == empty


def test_the_queue_is_taken_from_both_ends():
    a, b, c = (_signal([0.0], name=n) for n in "abc")
    queue = SignalQueue([a, b, c])
    assert queue.take_front() is a and queue.take_back() is c and queue.take_back() is b
    assert queue.take_front() is None and queue.take_back() is None


def test_the_helper_waits_for_signals_still_being_built_and_ends_when_the_queue_closes():
    import threading

    queue = SignalQueue(closed=False)
    taken: list = []
    taker = threading.Thread(target=lambda: taken.extend(iter(queue.take_back, None)))
    taker.start()
    a, b = _signal([0.0], name="a"), _signal([0.0], name="b")
    queue.add([a])
    queue.add([b])
    queue.close()
    taker.join(timeout=10)
    assert not taker.is_alive() and sorted(s.name for s in taken) == ["a", "b"]


@pytest.fixture
def helper_always(monkeypatch):
    """A helper for any dump, on any machine: the thresholds exist for speed, not for correctness."""
    monkeypatch.setattr(helper_module, "MIN_ROWS", 0)
    monkeypatch.setattr(beside, "usable_cpus", lambda: 2)
    returned: list[int] = []
    collect = SpikeHelper.collect

    def counting(self):
        found, unreturned = collect(self)
        returned.append(len(found))
        return found, unreturned

    monkeypatch.setattr(SpikeHelper, "collect", counting)
    return returned


def _report(helper: bool) -> dict:
    """The report as its JSON says it: what a reader sees must not depend on who searched."""
    report = analyse_dump(load_dump(str(FIXTURE)), load_rules(default_rules_dir()), helper=helper).report
    return json.loads(render_json(report))


def test_the_report_is_the_same_whoever_searched(helper_always):
    alone = _report(helper=False)
    assert helper_always == []
    shared = _report(helper=True)
    assert helper_always and helper_always[0] > 0, "the helper searched nothing"
    assert shared == alone


@pytest.mark.parametrize(
    "script",
    [
        "pass",  # exits at once
        "import sys; sys.stdin.buffer.readline(); print('not json', flush=True)",
        'import sys; sys.stdin.buffer.readline(); print(\'{"name": "another"}\', flush=True)',
        "import os; os._exit(3)",
    ],
)
def test_a_helper_that_fails_costs_nothing_but_time(helper_always, monkeypatch, script):
    alone = _report(helper=False)
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.DEVNULL}
    monkeypatch.setattr(
        launch_module, "start_process", lambda: subprocess.Popen([sys.executable, "-c", script], **pipes)
    )
    shared = _report(helper=True)
    assert helper_always == [0]
    assert shared == alone
    assert not any("spikes of" in w for w in shared["evidence"]["warnings"])


def test_a_helper_never_given_a_signal_is_stopped_not_waited_for_through_its_imports():
    """A dump that proves small closes the helper started for its files' size: it has nothing to finish."""
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.DEVNULL}
    # Still importing for a while, then it would see its input closed and end by itself (exit 0)
    script = "import sys, time; time.sleep(3); sys.stdin.read()"
    importing = subprocess.Popen([sys.executable, "-c", script], **pipes)
    SpikeHelper(importing).close()
    assert importing.returncode is not None and importing.returncode < 0, "stopped by a signal, and reaped"


def test_no_helper_where_one_core_is_all_there_is(monkeypatch):
    monkeypatch.setattr(beside, "usable_cpus", lambda: 1)
    assert SpikeHelper.start() is None


def test_the_launcher_needs_only_the_standard_library():
    probe = "import sys, diagnose.detect.launch; print(sorted({'numpy', 'pandas'} & set(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "[]", result.stderr


def test_diagnose_file_starts_the_helper_before_it_imports_pandas():
    """So that the helper's imports overlap this process's instead of the dump's multi-threaded read."""
    probe = (
        "import sys\n"
        "import diagnose.detect.launch as launch\n"
        "seen = []\n"
        "launch.start_for_files = lambda path: seen.append('pandas' in sys.modules)\n"
        "from diagnose.cli import main\n"
        f"code = main(['file', {str(FIXTURE)!r}, '--format', 'json', '-o', {os.devnull!r}])\n"
        "print(code, seen[0])\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert result.stdout.strip().splitlines()[-1] == "0 False", result.stderr
