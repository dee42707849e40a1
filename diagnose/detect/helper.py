"""A second process that searches signals of a big dump while this one works too.

Each signal's search (episodes, change points, periodicity) is independent of
the others and spends much of its time in Python between numpy calls, so
threads do not help (two threads on two cores: 1.14x, measured on a day-long
dump) and a second process does. The helper starts as early as it can (the
CLI starts it before importing the analysis stack: detect/launch.py), imports
meanwhile, and takes signals from the back of the queue as they are built, while this process builds the rest
and computes the facts, then searches from the front. Whoever searched a
signal, its findings are the same.

Signals go to the helper as one JSON header line and the raw float64 values;
findings come back as one JSON line each: plain data, no serialised Python
objects that could run code when read back. The helper is a fresh
``python -m diagnose.detect.helper``, not a fork of a process that may hold
threads. A helper that does not start, dies, answers nonsense or fails on a
signal costs only time: every signal it took and did not return is searched
here, where a failure becomes the usual warning.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Iterable
from queue import SimpleQueue
from typing import IO

import numpy as np

from diagnose.detect import launch
from diagnose.detect.episodes import Episode
from diagnose.detect.periodicity import Periodicity
from diagnose.detect.search import SignalFindings, search_shape
from diagnose.detect.signals import Signal
from diagnose.dump.model import Dump
from diagnose.processes.heap import leave_the_rest_to_exit, reuse_freed_memory

# Below this many rows over all tables the searches take well under a second, and the helper's
# start-up (about half a second of another core, importing numpy and pandas) would not pay for itself.
MIN_ROWS = 250_000
_CLOSE_WAIT_S = 5.0
_AHEAD = 3  # signals sent before their findings come back


class SignalQueue:
    """Signals waiting for a search: this process takes from the front, the helper from the back.

    Signals are added as they are built; until the queue is closed, the helper
    waits for more when it is empty, so that it searches while the rest are built.
    """

    def __init__(self, signals: Iterable[Signal] = (), closed: bool = True) -> None:
        self._signals = deque(signals)
        self._ready = threading.Condition()
        self._closed = closed

    def add(self, signals: Iterable[Signal]) -> None:
        with self._ready:
            self._signals.extend(signals)
            self._ready.notify_all()

    def close(self) -> None:
        """No more signals: a waiting taker gets None once the queue is empty."""
        with self._ready:
            self._closed = True
            self._ready.notify_all()

    def take_front(self) -> Signal | None:
        with self._ready:
            return self._signals.popleft() if self._signals else None

    def take_back(self) -> Signal | None:
        with self._ready:
            self._ready.wait_for(lambda: self._signals or self._closed)
            return self._signals.pop() if self._signals else None


class SpikeHelper:
    """The parent's side of the helper process: feeds it signals on a thread, keeps what comes back."""

    def __init__(self, process: subprocess.Popen) -> None:
        if process.stdin is None or process.stdout is None:
            raise ValueError("the spike helper talks through pipes: start it with stdin and stdout=PIPE")
        self._process = process
        self._stdin: IO[bytes] = process.stdin
        self._stdout: IO[bytes] = process.stdout
        self._threads: list[threading.Thread] = []
        self._taken: list[Signal] = []
        self._returned: dict[str, SignalFindings] = {}
        self._sent: SimpleQueue[Signal | None] = SimpleQueue()  # to the helper, awaiting its findings
        self._slots = threading.Semaphore(_AHEAD)
        self._stopped = False

    @classmethod
    def start(cls) -> SpikeHelper | None:
        """A running helper, or None where a second process cannot help or cannot start."""
        process = launch.start_process()
        return None if process is None else cls(process)

    @staticmethod
    def may_help(dump: Dump) -> bool:
        """Before the signals are built: is the dump big enough that a helper might pay for itself?"""
        return sum(len(table) for table in dump.tables.values()) >= MIN_ROWS

    def serve(self, queue: SignalQueue) -> None:
        """Start taking signals from the back of ``queue``, a few at a time, until it is closed and empty.

        One thread sends, one receives: a helper's long answer then never waits
        for this side to finish sending, and neither side waits for the other.
        """
        self._threads = [
            threading.Thread(target=self._send, args=(queue,), daemon=True),
            threading.Thread(target=self._receive, daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def collect(self) -> tuple[dict[str, SignalFindings], list[Signal]]:
        """Once the queue is empty: the findings returned, and the signals taken but not returned."""
        for thread in self._threads:
            thread.join()
        unreturned = [s for s in self._taken if s.name not in self._returned]
        return dict(self._returned), unreturned

    def close(self) -> None:
        """End the helper: it exits when its input closes; one that does not is killed. One never given
        a signal (the dump proved small) has nothing to finish and is still importing: it is stopped,
        not waited for (half a second at the end of every analysis of a dump of a few MB)."""
        process = self._process
        if any(thread.is_alive() for thread in self._threads):
            self._stopped = True  # given up on before the queue ran dry (the analysis failed or was stopped)
            process.kill()
        elif not self._threads:
            self._stdin.close()  # never served
            process.kill()
        try:
            process.wait(timeout=_CLOSE_WAIT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        self._stdout.close()

    def _send(self, queue: SignalQueue) -> None:
        stdin = self._stdin
        try:
            # A few signals ahead of the findings, so that the helper does not wait on the receiving
            # thread, which needs the interpreter lock that the main thread holds through pandas calls.
            while self._slots.acquire() and not self._stopped and (signal := queue.take_back()) is not None:
                self._taken.append(signal)
                self._sent.put(signal)
                write_signal(stdin, signal)
        except (OSError, ValueError):
            pass  # the helper is gone: what it took and did not return is searched here
        finally:
            self._sent.put(None)
            try:
                stdin.close()
            except OSError:
                pass

    def _receive(self) -> None:
        stdout = self._stdout
        try:
            while (signal := self._sent.get()) is not None:
                line = stdout.readline()
                if not line:
                    break
                reply = json.loads(line)
                if reply.get("name") != signal.name:
                    break
                if "error" not in reply:
                    self._returned[signal.name] = decode_findings(reply, signal)
                self._slots.release()
            else:
                return
        except (OSError, ValueError, KeyError, TypeError):
            pass
        # The helper died or answered nonsense: stop it, and the sender with it.
        self._stopped = True
        self._process.kill()
        self._slots.release()


def write_signal(stream: IO[bytes], signal: Signal) -> None:
    values = np.ascontiguousarray(signal.values, dtype="<f8")
    header = {"name": signal.name, "kind": signal.kind, "start": signal.start, "step": signal.step}
    stream.write(json.dumps({**header, "size": int(values.size)}).encode() + b"\n")
    stream.write(values.tobytes())
    stream.flush()


def read_signal(stream: IO[bytes]) -> Signal | None:
    """The next signal, or None at the end of the input."""
    line = stream.readline()
    if not line:
        return None
    header = json.loads(line)
    data = stream.read(8 * int(header["size"]))
    if len(data) != 8 * int(header["size"]):
        return None  # cut short: the parent is gone
    values = np.frombuffer(data, dtype="<f8").astype(np.float64)
    return Signal(header["name"], header["kind"], float(header["start"]), float(header["step"]), values)


def encode_findings(found: SignalFindings) -> dict:
    """JSON-ready findings; Python's json writes floats so that they read back exactly (NaN included)."""
    period = found.periodicity
    return {
        "name": found.signal.name,
        "change_points": found.change_points,
        "episodes": [[e.start, e.end, e.peak, e.baseline, e.direction] for e in found.episodes],
        "periodicity": None
        if period is None
        else [period.period_s, period.jitter_s, period.occurrences, period.p_value],
    }


def decode_findings(reply: dict, signal: Signal) -> SignalFindings:
    period = reply["periodicity"]
    episodes = [
        Episode(float(start), float(end), float(peak), float(level), int(direction))
        for start, end, peak, level, direction in reply["episodes"]
    ]
    if period is not None:
        period = Periodicity(float(period[0]), float(period[1]), int(period[2]), float(period[3]))
    return SignalFindings(signal, [float(t) for t in reply["change_points"]], episodes, period)


def _serve(stdin: IO[bytes], stdout: IO[bytes]) -> None:
    """The helper's loop: one signal in, one line of findings (or of the error) out.

    Periodicity is left to the parent, which knows the whole span once every signal is built.
    """
    with np.errstate(all="ignore"):  # as in the pipeline: NaN and inf are missing values
        while (signal := read_signal(stdin)) is not None:
            try:
                reply = encode_findings(search_shape(signal))
            except Exception as error:  # noqa: BLE001 - reported to the parent, which searches it again
                reply = {"name": signal.name, "error": f"{type(error).__name__}: {error}"}
            stdout.write(json.dumps(reply).encode() + b"\n")
            stdout.flush()


if __name__ == "__main__":
    reuse_freed_memory()
    try:
        _serve(sys.stdin.buffer, sys.stdout.buffer)
    except (KeyboardInterrupt, BrokenPipeError):
        pass  # Ctrl-C reaches the whole process group; the parent reports it
    leave_the_rest_to_exit()  # the parent waits for this exit
