"""Whether each source a recording was asked for delivers, told at once and kept in the manifest.

A fifteen-minute recording whose request log never existed, or whose server
never answered, is found out when it is too late to record again. So every
source given on the command line (the request log, the ``/metrics`` URL, the
watched pids, the allocator and watched logs) is checked before the first
sample, watched on every sample, warned about on the terminal as soon as it
fails and again every ``warn_every_s`` while it stays down, and written into
the manifest's ``sources`` section: ``ok``, ``never reached`` or ``lost`` at
a time, each with its reason. ``diagnose file`` and the live view show it.

A source that answers but gives nothing to keep (a ``/metrics`` page of no
engine diagnose knows, not mapped with ``--metrics-map``) is neither down nor
lost: it is ``answers, nothing kept``, said once with how to map it, not
warned about every minute as if it were down.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from diagnose.dump.model import SourceStatus


@dataclass
class _Source:
    name: str  # what it is, for a person: "request log", "metrics endpoint", "server process"
    target: str  # the path, URL or pid the user gave
    ever_ok: bool = False
    down_since: float | None = None
    reason: str | None = None
    failed_samples: int = 0
    outages: int = 0
    last_warned: float | None = None
    unused: str | None = None  # it answers, but nothing of what it says is kept: why, and what to do
    detail: dict | None = None  # more the manifest keeps of it (a metrics endpoint's --metrics-map)

    @property
    def status(self) -> SourceStatus:
        if self.unused is not None and self.down_since is None:
            return SourceStatus.UNUSED
        if self.down_since is None and self.ever_ok:
            return SourceStatus.OK
        return SourceStatus.LOST if self.ever_ok else SourceStatus.NEVER_REACHED

    def describe(self) -> str:
        return f"{self.name} {self.target}"


class SourceHealth:
    """One record per source; ``update`` returns True when the manifest should be rewritten."""

    def __init__(self, say: Callable[[str], None], warn_every_s: float = 60.0) -> None:
        self.say, self._warn_every_s = say, warn_every_s
        self._sources: dict[str, _Source] = {}

    def add(self, key: str, name: str, target: str, detail: dict | None = None) -> None:
        self._sources[key] = _Source(name, target, detail=detail)

    def retarget(self, key: str, target: str) -> None:
        """A watched server came back under a new pid: the source follows it."""
        if key in self._sources:
            self._sources[key].target = target

    def update(self, key: str, now: float, reason: str | None) -> bool:
        """Record one check: ``reason`` is None when the source delivered, else why it did not."""
        source = self._sources.get(key)
        if source is None:
            return False
        if reason is None:
            if source.down_since is None and source.ever_ok and source.unused is None:
                return False
            source.unused = None
            if source.down_since is not None:
                down_s = now - source.down_since
                self.say(f"diagnose: {source.describe()} delivers again after {down_s:.0f} s")
            source.ever_ok, source.down_since, source.reason = True, None, None
            return True
        source.failed_samples += 1
        if source.down_since is None:
            source.down_since, source.reason, source.last_warned = now, reason, now
            source.outages += 1 if source.ever_ok else 0
            self.say(f"diagnose: warning: {source.describe()}: {reason}{self._consequence(source)}")
            return True
        changed, source.reason = reason != source.reason, reason
        if now - (source.last_warned or now) >= self._warn_every_s:
            source.last_warned = now
            self.say(
                f"diagnose: warning: {source.describe()} still down after {now - source.down_since:.0f} s: "
                f"{reason}"
            )
        return changed

    def answers_unused(self, key: str, now: float, reason: str) -> bool:
        """The source answered, with nothing diagnose keeps: said once (and again if it was down)."""
        source = self._sources.get(key)
        if source is None or (source.unused == reason and source.down_since is None):
            return False
        if source.down_since is not None and source.ever_ok:
            self.say(f"diagnose: {source.describe()} answers again after {now - source.down_since:.0f} s")
        source.down_since, source.reason = None, None
        source.ever_ok, source.unused = True, reason
        self.say(f"diagnose: note: {source.describe()} answers, but nothing from it is kept: {reason}")
        return True

    def dead_now(self, key: str) -> bool:
        source = self._sources.get(key)
        return source is not None and source.down_since is not None

    def dead(self) -> list[str]:
        """Sources that are down now, as one line each."""
        return [f"{s.describe()}: {s.reason}" for s in self._sources.values() if s.down_since is not None]

    def manifest(self) -> dict[str, dict]:
        """The manifest's ``sources`` section (docs/dump-format.md)."""
        section = {}
        for key, source in self._sources.items():
            entry: dict = {"kind": source.name, "target": source.target, "status": source.status.value}
            entry.update(source.detail or {})
            if source.status == SourceStatus.LOST:
                entry["at"] = _iso(source.down_since)
            if source.reason and source.status != SourceStatus.OK:
                entry["reason"] = source.reason
            if source.status == SourceStatus.UNUSED:
                entry["reason"] = source.unused
            if source.failed_samples:
                entry["failed_samples"] = source.failed_samples
            if source.outages:
                entry["outages"] = source.outages
            section[key] = entry
        return section

    @staticmethod
    def _consequence(source: _Source) -> str:
        if source.ever_ok:
            return "; recording goes on without it and says so in the manifest"
        return "; recording goes on and reads it if it appears (use --strict to stop instead)"


def _iso(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
