"""What the live view watches: a host sampled now, or a recorded dump played on a clock.

Both answer one question, "the dump of the last N seconds", so the view runs a
single analysis path whatever the source: a replay looks exactly like live,
and a recorded dump opened at its end is exactly ``diagnose file``.
"""

from __future__ import annotations

import math
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from diagnose.collectors.recorder import RecordOptions, record
from diagnose.collectors.writer import DumpWriter
from diagnose.dump.model import Dump, Manifest
from diagnose.dump.reader import table_from_rows
from diagnose.errors import DumpError


@dataclass(frozen=True)
class FeedState:
    mode: str  # "live", "replay" or "file"
    host: str
    gpus: tuple[str, ...]
    gpu_note: str | None  # why there are no GPU figures, when there are none
    position: float | None  # epoch seconds the view is at
    start: float | None
    end: float | None
    speed: float
    paused: bool
    finished: bool  # a replay that reached the end of its dump
    recording: str | None = None  # the folder a live view also writes to


def last_complete_second(position: float) -> float:
    """The end of the last whole second before ``position`` (epoch seconds), just short of the second
    under way: a second still filling reads as a drop in throughput and a minimum no second had."""
    return float(np.nextafter(math.floor(position), -np.inf))


class ReplayFeed:
    """A loaded dump played from its start at ``speed`` x real time, or shown at its end."""

    def __init__(
        self,
        dump: Dump,
        speed: float = 1.0,
        from_start: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        span = dump.span()
        if span is None:
            raise DumpError(f"{dump.path}: the dump holds no rows to replay")
        self._dump, (self._start, self._end) = dump, span
        self._speed, self._clock = speed, clock
        self._played = 0.0 if from_start else self._end - self._start
        self._since = clock()
        self._paused = False
        self.mode = "replay" if from_start else "file"

    def position(self) -> float:
        played = self._played + (0.0 if self._paused else (self._clock() - self._since) * self._speed)
        return min(self._start + played, self._end)

    def pause(self) -> None:
        if not self._paused:
            self._played, self._paused = self.position() - self._start, True

    def resume(self) -> None:
        if self._paused:
            self._since, self._paused = self._clock(), False

    def window(self, seconds: float | None) -> Dump:
        """The last ``seconds`` before the replay position (None: everything up to it), ending with its
        last complete second; at the dump's end, everything, so that the view is the file's analysis."""
        position = self.position()
        now = self._end if position >= self._end else last_complete_second(position)
        return self._dump.between(self._start if seconds is None else now - seconds, now)

    def state(self) -> FeedState:
        gpu = self._dump.table("gpu")
        gpus: tuple[str, ...] = ()
        if gpu is not None:
            ids = sorted(gpu["gpu"].dropna().unique()) if "gpu" in gpu.columns else [0]
            gpus = tuple(f"GPU {int(g)}" for g in ids)
        return FeedState(
            mode=self.mode,
            host=self._dump.manifest.host or "unknown host",
            gpus=gpus,
            gpu_note=None if gpus else "this dump has no GPU table",
            position=self.position(),
            start=self._start,
            end=self._end,
            speed=self._speed,
            paused=self._paused,
            finished=self.position() >= self._end,
        )

    def messages(self) -> list[str]:
        """Nothing to report while replaying: the reader's warnings were printed at start."""
        return []

    def close(self) -> None:
        """Nothing to stop: the dump is already in memory."""


@dataclass
class _Memory:
    """Samples not yet read by the view (``rows``); the view keeps the last ``keep_s`` seconds as frames."""

    keep_s: float
    rows: dict[str, deque] = field(default_factory=dict)
    manifest: dict = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


class _MemorySink:
    """Takes the recorder's rows into memory, and onto disk too when asked to record."""

    def __init__(self, memory: _Memory, disk: DumpWriter | None) -> None:
        self._memory, self._disk = memory, disk

    def append(self, table: str, rows: list[dict]) -> None:
        if not rows:
            return
        with self._memory.lock:
            self._memory.rows.setdefault(table, deque()).extend(rows)
        if self._disk is not None:
            self._disk.append(table, rows)

    def flush(self) -> None:
        cutoff = time.time() - self._memory.keep_s
        with self._memory.lock:
            for kept in self._memory.rows.values():
                while kept and _ts(kept[0]) < cutoff:
                    kept.popleft()
        if self._disk is not None:
            self._disk.flush()

    def set_manifest(self, **fields: object) -> None:
        with self._memory.lock:
            self._memory.manifest.update(fields)
        if self._disk is not None:
            self._disk.set_manifest(**fields)

    def close(self, **summary: object) -> None:
        if self._disk is not None:
            self._disk.close(**summary)


class LiveFeed:
    """Samples this host through the collectors on a background thread, as ``diagnose record`` does."""

    def __init__(self, options: RecordOptions, keep_s: float = 3600.0) -> None:
        self._options = options
        self._memory = _Memory(keep_s)
        disk = DumpWriter(options.output, options.interval_s, force=options.force) if options.output else None
        self._sink = _MemorySink(self._memory, disk)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="diagnose-sampler", daemon=True)
        self._host = socket.gethostname()
        self._frozen: float | None = None
        self._frames: dict[str, pd.DataFrame] = {}  # what the view has read, the last keep_s seconds
        self._frames_lock = threading.Lock()  # window() runs on a worker, state() also on the UI thread
        self._notes: deque[str] = deque()  # what the recorder said, for the view to show once

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        try:
            record(self._options, self._stop, say=self._notes.append, sink=self._sink)
        except Exception as error:  # noqa: BLE001 - the view stays up and says why sampling stopped
            self._notes.append(f"sampling stopped: {error}")

    def messages(self) -> list[str]:
        """What the sampler said since the last call (GPU missing, server found, sampling stopped)."""
        said = []
        while self._notes:
            said.append(self._notes.popleft())
        return said

    def position(self) -> float:
        return self._frozen if self._frozen is not None else time.time()

    def pause(self) -> None:
        """Freeze the view; sampling (and recording) go on."""
        if self._frozen is None:
            self._frozen = time.time()

    def resume(self) -> None:
        self._frozen = None

    def window(self, seconds: float | None) -> Dump:
        """Only rows new since the last call are converted; the kept frames are then cut to the window,
        which ends with the last complete second."""
        end = last_complete_second(self.position())
        warnings: list[str] = []
        with self._memory.lock:
            fresh = {name: list(kept) for name, kept in self._memory.rows.items() if kept}
            for kept in self._memory.rows.values():
                kept.clear()
            manifest = dict(self._memory.manifest)
        with self._frames_lock:
            for name, rows in fresh.items():
                frame = table_from_rows(name, rows, f"live {name}", warnings)
                if frame is not None and len(frame):
                    self._append(name, frame)
            frames = dict(self._frames)
        extra = {key: manifest[key] for key in ("server_pids", "sources") if manifest.get(key)}
        label = str(self._options.output) if self._options.output else f"live:{self._host}"
        dump = Dump(
            label,
            frames,
            {name: [f"live {name}"] for name in frames},
            Manifest(host=self._host, interval_s=self._options.interval_s, extra=extra),
            warnings,
        )
        return dump.between(end - (seconds or self._memory.keep_s), end)

    def _append(self, name: str, frame: pd.DataFrame) -> None:
        kept = self._frames.get(name)
        if kept is not None:
            frame = pd.concat([kept, frame], ignore_index=True)
            if not frame["ts"].is_monotonic_increasing:
                frame = frame.sort_values("ts", kind="stable", ignore_index=True)
        cutoff = time.time() - self._memory.keep_s
        first = int(frame["ts"].searchsorted(cutoff))
        self._frames[name] = frame.iloc[first:].reset_index(drop=True) if first else frame

    def state(self) -> FeedState:
        with self._memory.lock:
            manifest = dict(self._memory.manifest)
        with self._frames_lock:
            first = [float(frame["ts"].iloc[0]) for frame in self._frames.values() if len(frame)]
        return FeedState(
            mode="live",
            host=self._host,
            gpus=tuple(manifest.get("gpus") or ()),
            gpu_note=manifest.get("gpu_note"),
            position=self.position(),
            start=min(first) if first else None,
            end=time.time(),
            speed=1.0,
            paused=self._frozen is not None,
            finished=False,
            recording=str(self._options.output) if self._options.output else None,
        )

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)


def _ts(row: dict) -> float:
    try:
        return float(row.get("ts", 0.0))
    except (TypeError, ValueError):
        return 0.0
