"""The flight recorder: keep the last minutes in a ring, and save them when a trigger trips.

``diagnose record --ring 30m --trigger 'p99_ms > 500 for 10s' -o incidents/``
records as ``diagnose record`` does, into the ring (:mod:`.ring`) instead of
one dump. When a trigger fires (:mod:`.triggers`), or the recorder gets
``SIGUSR1`` (which ``diagnose record --dump-now -o incidents/`` sends), it
keeps recording for the ``--after`` span and then writes a normal dump of the
ring's minutes before and the span after into ``incidents/HOST-TIME/``, and
goes on. One dump at a time: a trigger that fires while a dump is being
gathered is noted in it, and one within ``--cooldown`` of the last is noted
in the ring, not dumped (a request by signal is always honoured).
"""

from __future__ import annotations

import fcntl
import os
import signal
import socket
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import psutil

from diagnose.collectors.ring import RING_FOLDER, Ring, incident_name
from diagnose.collectors.triggers import Firing, LiveSignals, Trigger, TriggerWatch
from diagnose.errors import InputError
from diagnose.units import counted, human_bytes

PID_FILE = "recorder.pid"


@dataclass(frozen=True)
class FlightOptions:
    folder: Path  # incidents go here; the ring in its .ring/
    keep_s: float
    max_bytes: int
    triggers: tuple[Trigger, ...] = ()
    after_s: float = 60.0
    cooldown_s: float = 600.0
    window_s: float = 10.0  # the trigger window of the request signals


@dataclass
class _Incident:
    first: Firing
    due: float
    name: str  # the dump's folder, chosen when it fires
    also: list[Firing] = field(default_factory=list)


class FlightRecorder:
    """The recorder's sink: samples into the ring, triggers checked once a tick, dumps cut when due."""

    def __init__(
        self,
        options: FlightOptions,
        interval_s: float,
        say: Callable[[str], None] = print,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.options, self._clock = options, clock
        self._say = say
        self._lock = _hold_lock(options.folder)
        self.ring = Ring(options.folder / RING_FOLDER, interval_s, options.keep_s, options.max_bytes, clock)
        self._signals = LiveSignals(options.window_s)
        self._watch = TriggerWatch(options.triggers)
        self._asked: deque[str] = deque()  # appended to by a signal handler
        self._pending: _Incident | None = None
        self._last_fired: float | None = None
        self._host = socket.gethostname()
        self.written: list[Path] = []
        self._closed = False

    def describe(self) -> str:
        """What it keeps, where, at what disk cost, and what makes it dump: said before the first sample."""
        triggers = "; ".join(t.text for t in self.options.triggers) or "no trigger"
        inherited = (
            f"; kept {counted(len(self.ring.inherited), 'segment')} of an earlier run"
            if self.ring.inherited
            else ""
        )
        return (
            f"diagnose: flight recorder: keeping the last {_span(self.options.keep_s)} in {self.ring.folder} "
            f"(at most {human_bytes(self.options.max_bytes)} on disk, oldest dropped first; segments of "
            f"{_span(self.ring.segment_s)}){inherited}; dumps {_span(self.options.keep_s)} before and "
            f"{_span(self.options.after_s)} after into {self.options.folder}/ on: {triggers}; SIGUSR1 "
            f"(diagnose record --dump-now -o {self.options.folder})"
        )

    def announce(self) -> None:
        """Write this process's pid where ``--dump-now`` looks for it. Called once the SIGUSR1 handler is
        installed: a pid written before would let ``--dump-now`` kill a recorder still starting (SIGUSR1's
        default action ends the process)."""
        self._lock.seek(0)
        self._lock.truncate()
        self._lock.write(f"{os.getpid()}\n")
        self._lock.flush()

    def request_dump(self, reason: str) -> None:
        """Safe to call from a signal handler: the dump starts at the next tick."""
        self._asked.append(reason)

    # -- the Sink protocol -------------------------------------------------------------------------

    def append(self, table: str, rows: list[dict]) -> None:
        if rows:
            self.ring.append(table, rows)
            self._signals.add(table, rows, self._clock())

    def flush(self) -> None:
        now = self._clock()
        firings = self._watch.check(self._signals, now)
        while self._asked:
            firings.append(Firing(self._asked.popleft(), now, {}))
        for firing in firings:
            self._fired(firing)
        self.ring.flush()
        if self._pending is not None and now >= self._pending.due:
            self._write(self._pending, now, cut_short=False)

    def set_manifest(self, **fields: object) -> None:
        self.ring.set_manifest(**fields)

    def close(self, **summary: object) -> None:
        if self._closed:
            return
        self._closed = True
        if self._pending is not None:
            self._write(self._pending, self._clock(), cut_short=True)
        self.ring.close(**summary)
        self._lock.close()

    # -- private -----------------------------------------------------------------------------------

    def _fired(self, firing: Firing) -> None:
        manual = not any(firing.trigger == t.text for t in self.options.triggers)
        shown = _values(firing)
        if self._pending is not None:
            self._pending.also.append(firing)
            return
        if (
            not manual
            and self._last_fired is not None
            and firing.at - self._last_fired < self.options.cooldown_s
        ):
            self.ring.append(
                "events",
                [_event(firing, "trigger_suppressed", f"{firing.trigger}{shown}; within --cooldown")],
            )
            since = _span(firing.at - self._last_fired)
            self._say(
                f"diagnose: trigger {firing.trigger!r} fired{shown} {since} after the last; "
                f"within --cooldown {_span(self.options.cooldown_s)}, not dumped"
            )
            return
        pending = self._pending = _Incident(firing, firing.at + self.options.after_s, self._name(firing.at))
        self._last_fired = firing.at
        self.ring.append("events", [_event(firing, "trigger", f"{firing.trigger} fired{shown}")])
        self._say(
            f"diagnose: {firing.trigger!r} fired{shown}; dumping the last {_span(self.options.keep_s)} "
            f"and the next {_span(self.options.after_s)} to {self.options.folder / pending.name}"
        )

    def _write(self, incident: _Incident, now: float, cut_short: bool) -> None:
        self._pending = None
        first = incident.first
        manifest = {
            "notes": f"flight recorder dump: {first.trigger} fired at {_iso(first.at)}",
            "trigger": {
                "condition": first.trigger,
                "at": _iso(first.at),
                "values": first.values,
                **(
                    {"also": [f"{f.trigger} at {_iso(f.at)}" for f in incident.also]} if incident.also else {}
                ),
            },
            "ring": {
                "kept_s": self.options.keep_s,
                "after_s": self.options.after_s,
                **({"cut_short": "the recorder stopped before the after span ended"} if cut_short else {}),
            },
        }
        path = self.ring.cut(
            first.at - self.options.keep_s, now, self.options.folder / incident.name, manifest
        )
        self.written.append(path)
        short = " (cut short)" if cut_short else ""
        self._say(f"diagnose: wrote {path}{short}; analyse it with: diagnose file {path}")

    def _name(self, at: float) -> str:
        base = incident_name(self._host, at)
        name, n = base, 1
        while (self.options.folder / name).exists():
            n += 1
            name = f"{base}-{n}"
        return name


def ask_running_recorder(folder: Path) -> int:
    """``--dump-now``: signal the flight recorder that keeps its ring in ``folder``; its pid is returned."""
    pid_file = folder / RING_FOLDER / PID_FILE
    try:
        said = pid_file.read_text(encoding="utf-8").strip()
    except OSError:
        said = ""
    if not said and pid_file.is_file() and _locked(pid_file):
        raise InputError(f"{folder}: the flight recorder here is still starting; ask again in a second")
    try:
        pid = int(said)
    except ValueError:
        raise InputError(
            f"{folder}: no flight recorder keeps a ring here (no readable {pid_file}); "
            "start one with diagnose record --ring 30m -o " + str(folder)
        ) from None
    if not _locked(pid_file) or not psutil.pid_exists(pid):
        raise InputError(f"{folder}: the flight recorder that kept this ring (pid {pid}) is not running")
    try:
        os.kill(pid, signal.SIGUSR1)
    except PermissionError:
        raise InputError(f"pid {pid}: permission denied; run --dump-now as the recorder's user") from None
    return pid


def _hold_lock(folder: Path):
    """One recorder per ring: the pid file, locked for the recorder's life (released by the OS on a crash),
    left empty until the recorder announces itself."""
    ring = folder / RING_FOLDER
    ring.mkdir(parents=True, exist_ok=True)
    handle = open(ring / PID_FILE, "a+", encoding="utf-8")  # noqa: SIM115 - held until close()
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        other = handle.read().strip() or "?"
        handle.close()
        raise InputError(
            f"{folder}: another flight recorder (pid {other}) keeps its ring here; "
            "stop it, or give another -o"
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.flush()
    return handle


def _locked(pid_file: Path) -> bool:
    with open(pid_file, encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


def _event(firing: Firing, kind: str, message: str) -> dict:
    return {"ts": firing.at, "kind": kind, "message": message, "trigger": firing.trigger, **firing.values}


def _values(firing: Firing) -> str:
    if not firing.values:
        return ""
    return " (" + ", ".join(f"{name}={value:g}" for name, value in firing.values.items()) + ")"


def _span(seconds: float) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g}h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g}m"
    return f"{seconds:.0f}s" if seconds >= 10 else f"{seconds:.1f}s"


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
