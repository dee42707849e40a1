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
from diagnose.live.panels import format_for, latest

_CELLS = np.array(list(" ▁▂▃▄▅▆▇█"))


class SeriesChart(Widget):
    DEFAULT_CSS = """
    SeriesChart { height: 5; padding: 0 1; }
    """

    def __init__(self, key: str, title: str, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.key, self.title = key, title
        self._signal: Signal | None = None
        self._span: tuple[float, float] = (0.0, 1.0)
        self._episodes: list[tuple[float, float]] = []
        self._note: str | None = None

    def show(
        self,
        signal: Signal | None,
        span: tuple[float, float],
        episodes: list[tuple[float, float]],
        note: str | None = None,
    ) -> None:
        self._signal, self._span, self._episodes, self._note = signal, span, episodes, note
        self.refresh()

    def render(self) -> Text:
        width, rows = max(self.size.width - 2, 10), max(self.size.height - 2, 1)
        columns = self._columns(width)
        text = Text(no_wrap=True, overflow="crop")
        text.append(self.title, style="bold")
        if columns is None:
            text.append(f"  {self._note or 'no samples in this window'}", style="dim")
            return text
        values = self._signal.values if self._signal is not None else np.array([])
        low, top = self._range()
        text.append(f"  now {format_for(self.key, latest(values))}")
        text.append(f"  min {format_for(self.key, low)}  max {format_for(self.key, top)}", style="dim")
        marks = self._marks(width)
        if marks.any():
            text.append(f"  {self._visible_episodes()} episode(s) ━", style="red")
        for line in self._bars(columns, low, top, rows):
            text.append("\n")
            text.append(line, style="cyan")
        text.append("\n")
        edges = np.flatnonzero(np.diff(marks.astype("int8"))) + 1
        for run in np.split(marks, edges):  # one styled span per run, not per column
            text.append(("━" if run[0] else "─") * run.size, style="bold red" if run[0] else "dim")
        return text

    def _columns(self, width: int) -> np.ndarray | None:
        """The window cut into ``width`` columns; each the highest value in it (spikes stay visible)."""
        signal = self._signal
        if signal is None or not signal.values.size or not np.isfinite(signal.values).any():
            return None
        start, end = self._span
        column = np.floor((signal.times() - start) / max(end - start, 1e-9) * width).astype("int64")
        inside = (column >= 0) & (column < width) & np.isfinite(signal.values)
        result = np.full(width, np.nan)
        np.fmax.at(result, column[inside], signal.values[inside])
        return result if np.isfinite(result).any() else None

    def _range(self) -> tuple[float, float]:
        """The lowest and highest sample inside the window (not of the column maxima)."""
        signal, (start, end) = self._signal, self._span
        times = signal.times()
        inside = signal.values[(times >= start) & (times <= end)]
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
        """Which columns of the time axis fall inside an episode."""
        start, end = self._span
        scale = width / max(end - start, 1e-9)
        marks = np.zeros(width, dtype=bool)
        for first, last in self._episodes:
            if last < start or first > end:
                continue
            lo = int(np.clip(np.floor((first - start) * scale), 0, width - 1))
            hi = int(np.clip(np.ceil((last - start) * scale), lo + 1, width))
            marks[lo:hi] = True
        return marks

    def _visible_episodes(self) -> int:
        start, end = self._span
        return sum(1 for first, last in self._episodes if last >= start and first <= end)
