"""A time-series chart for the terminal: bars over the window, episodes marked under them.

Textual's own Sparkline has no notion of time or of missing samples; an
incident view needs both: columns placed by time (a window that is not full
yet stays partly empty), blank columns where nothing was sampled, and the
detected episodes marked on the time axis so a periodic pattern is visible at
a glance. Bars span the window's min..max, which the title states.
"""

from __future__ import annotations

import numpy as np
from rich.text import Text
from textual.widget import Widget

from diagnose.detect.signals import Signal
from diagnose.live.panels import EpisodeMark, format_for, latest
from diagnose.units import counted

_CELLS = np.array(list(" ▁▂▃▄▅▆▇█"))
_MARK_STYLES = ("dim", "red", "bold red")  # outside episodes, in a routine one, in one that stands out


class SeriesChart(Widget):
    DEFAULT_CSS = """
    SeriesChart { height: 5; padding: 0 1; }
    """

    def __init__(self, key: str, title: str, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.key, self.title = key, title
        self._signal: Signal | None = None
        self._span: tuple[float, float] = (0.0, 1.0)
        self._episodes: list[EpisodeMark] = []
        self._note: str | None = None

    def show(
        self,
        signal: Signal | None,
        span: tuple[float, float],
        episodes: list[EpisodeMark],
        note: str | None = None,
    ) -> None:
        self._signal, self._span, self._episodes, self._note = signal, span, episodes, note
        self.refresh()

    def render(self) -> Text:
        width, rows = max(self.size.width - 2, 10), max(self.size.height - 2, 1)
        signal = self._signal
        values = self._whole(signal) if signal is not None else None
        columns = self._columns(width, signal, values) if signal is not None and values is not None else None
        text = Text(no_wrap=True, overflow="crop")
        text.append(self.title, style="bold")
        if columns is None or signal is None or values is None:
            text.append(f"  {self._note or 'no samples in this window'}", style="dim")
            return text
        low, top = self._range(signal, values)
        text.append(f"  now {format_for(self.key, latest(values))}")
        text.append(f"  min {format_for(self.key, low)}  max {format_for(self.key, top)}", style="dim")
        marks = self._marks(width)
        if marks.any():
            visible = self._visible_episodes()
            unusual = sum(not e.routine for e in visible)
            text.append(f"  {counted(len(visible), 'episode')}, {unusual} unusual ━", style="red")
        for line in self._bars(columns, low, top, rows):
            text.append("\n")
            text.append(line, style="cyan")
        text.append("\n")
        edges = np.flatnonzero(np.diff(marks)) + 1
        for run in np.split(marks, edges):  # one styled span per run, not per column
            text.append(("━" if run[0] else "─") * run.size, style=_MARK_STYLES[run[0]])
        return text

    def _whole(self, signal: Signal) -> np.ndarray:
        """The values to show. A rate's bins that the window cuts, the interval still running and the
        first one the window starts inside, are left out: counted over part of their span, they read
        low (14.9 requests/s shown as "now 1.0/s" a tenth of a second into the second)."""
        if signal.kind != "throughput":
            return signal.values
        start, end = self._span
        times = signal.times()
        return np.where((times >= start) & (times + signal.step <= end), signal.values, np.nan)

    def _columns(self, width: int, signal: Signal, values: np.ndarray) -> np.ndarray | None:
        """The window cut into ``width`` columns; each the highest value in it (spikes stay visible)."""
        if not values.size or not np.isfinite(values).any():
            return None
        start, end = self._span
        column = np.floor((signal.times() - start) / max(end - start, 1e-9) * width).astype("int64")
        inside = (column >= 0) & (column < width) & np.isfinite(values)
        result = np.full(width, np.nan)
        np.fmax.at(result, column[inside], values[inside])
        return result if np.isfinite(result).any() else None

    def _range(self, signal: Signal, values: np.ndarray) -> tuple[float, float]:
        """The lowest and highest sample inside the window (not of the column maxima)."""
        start, end = self._span
        times = signal.times()
        inside = values[(times >= start) & (times <= end)]
        inside = inside[np.isfinite(inside)]
        return float(inside.min()), float(inside.max())

    @staticmethod
    def _bars(columns: np.ndarray, low: float, top: float, rows: int) -> list[str]:
        """Rows of block characters, top row first; the window's minimum still shows as a sliver."""
        scaled = (columns - low) / (top - low) if top > low else np.full(columns.size, 0.5)
        eighths = np.where(np.isfinite(columns), np.maximum(np.round(scaled * rows * 8), 1), -1)
        lines = []
        for row in range(rows - 1, -1, -1):
            cells = np.where(eighths < 0, " ", _CELLS[np.clip(eighths - row * 8, 0, 8).astype("int64")])
            lines.append("".join(cells))
        return lines

    def _marks(self, width: int) -> np.ndarray:
        """Each column of the time axis: 0 outside episodes, 1 in a routine one, 2 in one that stands out."""
        start, end = self._span
        scale = width / max(end - start, 1e-9)
        marks = np.zeros(width, dtype="int8")
        for episode in self._visible_episodes():
            lo = int(np.clip(np.floor((episode.start - start) * scale), 0, width - 1))
            hi = int(np.clip(np.ceil((episode.end - start) * scale), lo + 1, width))
            marks[lo:hi] = np.maximum(marks[lo:hi], 1 if episode.routine else 2)
        return marks

    def _visible_episodes(self) -> list[EpisodeMark]:
        start, end = self._span
        return [e for e in self._episodes if e.end >= start and e.start <= end]
