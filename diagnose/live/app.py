"""The live view: a Textual app over a feed (this host, or a dump on a replay clock).

The UI thread never samples or analyses. A one-second timer asks a thread
worker for the current window (cheap: slicing and 1 s signals); every few
seconds another worker runs the full analysis on that window. Both post their
results back as messages, and an exclusive worker replaces a stale one, so a
slow analysis delays the findings, never the screen.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from rich.text import Text
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import DataTable, Footer, OptionList, Static
from textual.widgets.option_list import Option

from diagnose.detect.signals import Signal, build_signals, process_commands, signal_words
from diagnose.dump.model import Dump
from diagnose.judge.rules import Rule
from diagnose.live.chart import SeriesChart
from diagnose.live.export import default_export_dir, export_path
from diagnose.live.feed import FeedState
from diagnose.live.pages import HELP, DocumentScreen
from diagnose.live.panels import (
    Chart,
    clock_label,
    episodes,
    missing_evidence_lines,
    position_label,
    stage_rows,
    standard_charts,
    top_processes,
    window_label,
)
from diagnose.pipeline import Analysis, analyse_dump
from diagnose.report.cited import cited_signals
from diagnose.report.markdown import render_hypothesis, render_markdown, render_not_found, render_sources
from diagnose.report.model import Hypothesis, Report
from diagnose.units import counted
from diagnose.verify import Host, verify_report
from diagnose.verify.render import render

WINDOWS: tuple[float | None, ...] = (60.0, 300.0, 900.0, 3600.0, None)  # None: everything so far


class Feed(Protocol):
    def position(self) -> float: ...
    def window(self, seconds: float | None) -> Dump: ...
    def messages(self) -> list[str]: ...
    def state(self) -> FeedState: ...
    def pause(self) -> None: ...
    def resume(self) -> None: ...
    def close(self) -> None: ...


@dataclass(frozen=True)
class LiveSettings:
    rules: list[Rule]
    window_s: float | None = 900.0
    refresh_s: float = 5.0  # how often the analysis re-runs
    slo_p99_ms: float | None = None
    export_dir: Path = field(default_factory=default_export_dir)
    verify_host: Host = field(default_factory=Host)  # what `v` reads of this machine (tests give their own)


class Sampled(Message):
    def __init__(
        self, window: Dump, signals: dict[str, Signal], state: FeedState, processes: tuple[list, list]
    ) -> None:
        super().__init__()
        self.window, self.signals, self.state, self.processes = window, signals, state, processes


class Analysed(Message):
    def __init__(self, analysis: Analysis, seconds: float, window: Dump) -> None:
        super().__init__()
        self.analysis, self.seconds, self.window = analysis, seconds, window


class Exported(Message):
    def __init__(self, path: Path, error: OSError | None = None) -> None:
        super().__init__()
        self.path, self.error = path, error


class VerifyDone(Message):
    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


class AnalysisFailed(Message):
    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error


class LiveApp(App[None]):
    TITLE = "diagnose"
    CSS = """
    #top { height: 1; background: $primary; color: $text; padding: 0 1; }
    #body { height: 1fr; }
    #charts { width: 3fr; }
    #side { width: 2fr; }
    #hypotheses { height: auto; max-height: 12; border: round $accent; }
    #detail-box { height: 1fr; min-height: 4; }
    #detail { padding: 0 1; }
    #stages { height: auto; max-height: 9; border: round $panel; }
    #cpu-processes, #gpu-processes { height: auto; max-height: 8; border: round $panel; }
    """
    BINDINGS = [
        Binding("p", "toggle_pause", "Pause/resume"),
        Binding("w", "next_window", "Window"),
        Binding("enter", "open_hypothesis", "Open", show=False),
        Binding("o", "not_fired", "Ruled out"),
        Binding("m", "export_markdown", "Markdown"),
        Binding("v", "verify", "Verify"),
        Binding("tab", "focus_next", "Next panel", show=False),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("q", "quit", "Quit"),
        # What a terminal user presses first, and what the help says: quit, not Textual's hint about ctrl+q.
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True),
    ]

    def __init__(self, feed: Feed, settings: LiveSettings) -> None:
        super().__init__()
        self.feed, self.settings = feed, settings
        self.window_s = settings.window_s
        self.paused = False
        self.report: Report | None = None  # the latest analysis
        self._analysed: tuple[Analysis, Dump] | None = None  # and what it was made of, for the pictures
        self.samples = 0
        self.analyses = 0
        self._analysing = False
        self._last_analysis = float("-inf")
        self._analysed_key: tuple | None = None
        self._state: FeedState | None = None
        self._signals: dict[str, Signal] = {}
        self._window: Dump | None = None  # the last window sampled: whose processes a cited chart names
        self._span = (0.0, 1.0)
        self._charts: dict[str, SeriesChart] = {}
        self._analysis_s: float | None = None
        self.exported: Path | None = None  # the last Markdown file written

    def compose(self) -> ComposeResult:
        yield Static(id="top")
        with Horizontal(id="body"):
            yield VerticalScroll(id="charts")
            with Vertical(id="side"):
                hypotheses = OptionList(id="hypotheses")
                hypotheses.border_title = "Hypotheses (enter: open)"
                yield hypotheses
                with VerticalScroll(id="detail-box"):
                    yield Static(id="detail")
                stages: DataTable = DataTable(id="stages", cursor_type="row", zebra_stripes=True)
                stages.border_title = "Stages"
                yield stages
                cpu: DataTable = DataTable(id="cpu-processes", cursor_type="row")
                cpu.border_title = "Top processes by CPU"
                yield cpu
                gpu: DataTable = DataTable(id="gpu-processes", cursor_type="row")
                gpu.border_title = "Top processes by GPU memory"
                yield gpu
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#stages", DataTable).add_columns("stage", "kind", "of mean", "P50", "P99", "of tail")
        self.query_one("#cpu-processes", DataTable).add_columns("pid", "name", "CPU", "busiest thread")
        self.query_one("#gpu-processes", DataTable).add_columns("pid", "name", "GPU", "memory")
        self.query_one("#hypotheses", OptionList).add_option(
            Option("waiting for the first analysis...", disabled=True)
        )
        self._show_top()
        self.set_interval(1.0, self._tick)
        self._tick()

    def on_unmount(self) -> None:
        self.feed.close()

    # -- the refresh cycle -------------------------------------------------

    def _torn_down(self) -> bool:
        """The view's widgets are gone (the app is closing): a timer or message arriving late must not
        touch them. On a loaded machine the 1 s timer can fire after the screen is taken down."""
        return not self.query("#top")

    def _tick(self) -> None:
        if self._torn_down():
            return
        for line in self.feed.messages():
            self.notify(line, title="diagnose", timeout=8)
        if not self.paused:
            self._sample(self.window_s)
        self._show_top()

    @work(thread=True, exclusive=True, group="sample")
    def _sample(self, window_s: float | None) -> None:
        window = self.feed.window(window_s)
        signals = {s.name: s for s in build_signals(window, window.server_pids)} if window.tables else {}
        self.post_message(Sampled(window, signals, self.feed.state(), top_processes(window)))

    def on_sampled(self, message: Sampled) -> None:
        if self.paused or self._torn_down():
            return
        self.samples += 1
        self._state, self._signals = message.state, message.signals
        self._window = message.window
        position = message.state.position or time.time()
        self._span = (position - self.window_s, position) if self.window_s else _span_of(message)
        self._show_charts()
        self._show_processes(*message.processes)
        key = (math.floor(position), self.window_s)  # the window's last complete second
        due = time.monotonic() - self._last_analysis >= self.settings.refresh_s
        if not self._analysing and key != self._analysed_key and (due or self._analysed_key is None):
            self._analysing, self._analysed_key = True, key
            self._last_analysis = time.monotonic()
            self._analyse(message.window)

    @work(thread=True, exclusive=True, group="analysis")
    def _analyse(self, window: Dump) -> None:
        started = time.perf_counter()
        try:
            analysis = analyse_dump(window, self.settings.rules, self.settings.slo_p99_ms)
        except Exception as error:  # noqa: BLE001 - shown as a notice; the view stays up
            self.post_message(AnalysisFailed(error))
            return
        self.post_message(Analysed(analysis, time.perf_counter() - started, window))

    def on_analysed(self, message: Analysed) -> None:
        self._analysing = False
        if self._torn_down():
            return
        self.analyses += 1
        self.report, self._analysis_s = message.analysis.report, message.seconds
        self._analysed = (message.analysis, message.window)
        self._show_hypotheses()
        self._show_stages()
        self._show_charts()
        self._show_top()

    def on_analysis_failed(self, message: AnalysisFailed) -> None:
        self._analysing = False
        self.notify(f"analysis failed: {message.error}", title="diagnose", severity="error", timeout=8)

    # -- panels ------------------------------------------------------------

    def _show_top(self) -> None:
        state = self._state or self.feed.state()
        parts = [f"diagnose · {state.host}"]
        parts.append(counted(len(state.gpus), "GPU") if state.gpus else f"no GPU: {state.gpu_note}")
        parts.append(f"window {window_label(self.window_s)}")
        parts.append(position_label(state, self.paused))
        if state.recording:
            parts.append(f"recording to {state.recording}")
        if self.report is not None:
            parts.append(f"analysed {clock_label(self._analysed_key[0] if self._analysed_key else None)}")
            parts.append(f"in {self._analysis_s:.1f} s")
        self.query_one("#top", Static).update(Text(" │ ".join(parts), no_wrap=True, overflow="ellipsis"))

    def _show_charts(self) -> None:
        charts = standard_charts(self._signals)
        hypothesis = self._highlighted()
        if hypothesis is not None and self.report is not None:
            shown = {c.key for c in charts}
            cited = [n for n in cited_signals(hypothesis, self.report, self._signals) if n not in shown]
            commands = process_commands(self._window.tables) if cited and self._window else {}
            for name in cited:
                charts.append(Chart(name, f"cited: {signal_words(name, commands)}", self._signals[name]))
        container = self.query_one("#charts", VerticalScroll)
        wanted = [c.key for c in charts]
        for key in [k for k in self._charts if k not in wanted]:
            self._charts.pop(key).remove()
        no_gpu = self._state.gpu_note if self._state and not self._state.gpus else None
        for chart in charts:
            widget = self._charts.get(chart.key)
            if widget is None:
                widget = self._charts[chart.key] = SeriesChart(chart.key, chart.title)
                container.mount(widget)
            marks = episodes(self._analysed[0].spikes, chart.key) if self._analysed else []
            widget.show(chart.signal, self._span, marks)
        if no_gpu and "no-gpu" not in self._charts:
            note = SeriesChart("no-gpu", "GPU")
            self._charts["no-gpu"] = note
            container.mount(note)
        if "no-gpu" in self._charts:
            self._charts["no-gpu"].show(None, self._span, [], f"no GPU here: {no_gpu}")

    def _show_hypotheses(self) -> None:
        assert self.report is not None
        options = self.query_one("#hypotheses", OptionList)
        keep = self._highlighted()
        options.clear_options()
        hypotheses = self.report.hypotheses
        if not hypotheses:
            options.add_option(
                Option("no hypothesis: no rule found evidence of a known cause", disabled=True)
            )
        for h in hypotheses:
            label = Text()
            label.append(f"{h.score:.2f} ", style="bold red" if h.score >= 0.5 else "yellow")
            label.append(f"{h.confidence:<9}", style="dim")
            label.append(h.id, style="bold")
            label.append(f"  {h.title}")
            options.add_option(Option(label, id=h.id))
        if hypotheses:
            ids = [h.id for h in hypotheses]
            options.highlighted = ids.index(keep.id) if keep and keep.id in ids else 0
        self._show_detail()

    def _show_detail(self) -> None:
        hypothesis = self._highlighted()
        detail = Text()
        if hypothesis is not None:
            for line in hypothesis.evidence[:4]:
                detail.append("• ", style="green")
                detail.append(line.text + "\n")
            for line in hypothesis.contrary[:2]:
                detail.append("✗ against: ", style="yellow")
                detail.append(line.text + "\n")
        elif self.report is not None:
            for said in missing_evidence_lines(self.report):
                detail.append(said + "\n", style="yellow")
            not_fired = len(self.report.ruled_out) + len(self.report.not_run)
            detail.append(
                f"{counted(not_fired, 'rule')} ruled out or not checked; press o to see why", style="dim"
            )
        self.query_one("#detail", Static).update(detail)

    def _show_stages(self) -> None:
        table = self.query_one("#stages", DataTable)
        table.clear()
        for row in stage_rows(self.report):
            table.add_row(*row)

    def _show_processes(self, by_cpu: list, by_gpu: list) -> None:
        for table_id, rows in (("#cpu-processes", by_cpu), ("#gpu-processes", by_gpu)):
            table = self.query_one(table_id, DataTable)
            table.clear()
            for row in rows:
                table.add_row(*row)

    def _highlighted(self) -> Hypothesis | None:
        if self.report is None or not self.report.hypotheses:
            return None
        index = self.query_one("#hypotheses", OptionList).highlighted
        hypotheses = self.report.hypotheses
        return hypotheses[index] if index is not None and index < len(hypotheses) else None

    def on_option_list_option_highlighted(self, _: OptionList.OptionHighlighted) -> None:
        self._show_detail()
        self._show_charts()

    def on_option_list_option_selected(self, _: OptionList.OptionSelected) -> None:
        self.action_open_hypothesis()

    # -- actions -------------------------------------------------------------

    def action_open_hypothesis(self) -> None:
        hypothesis, report = self._highlighted(), self.report
        if hypothesis is None or report is None:
            self.notify("no hypothesis to open yet", timeout=3)
            return
        rank = report.hypotheses.index(hypothesis) + 1
        self.push_screen(DocumentScreen("\n".join(render_hypothesis(rank, hypothesis)), id="hypothesis"))

    def action_not_fired(self) -> None:
        if self.report is None:
            self.notify("no analysis yet", timeout=3)
            return
        lines = render_not_found(self.report) or ["Every rule fired."]
        lines += ["", *render_sources(self.report.evidence)]
        self.push_screen(DocumentScreen("\n".join(lines), id="not-fired"))

    def action_help(self) -> None:
        self.push_screen(DocumentScreen(HELP, id="help"))

    def action_verify(self) -> None:
        state = self._state or self.feed.state()
        if self._analysed is None:
            self.notify("no analysis yet; nothing to verify", severity="warning", timeout=4)
            return
        if state.mode != "live":
            self.notify(
                "verify reads the host it runs on now, and this is a recording: run `diagnose verify DUMP` "
                "on the host the dump came from",
                severity="warning",
                timeout=8,
            )
            return
        if not self._analysed[0].report.hypotheses:
            self.notify("no finding in this window: nothing to verify", title="verify", timeout=4)
            return
        self.notify("verifying on this host: about ten seconds", title="verify", timeout=4)
        self._verify(*self._analysed, state.host)

    @work(thread=True, exclusive=True, group="verify")
    def _verify(self, analysis: Analysis, window: Dump, host: str) -> None:
        """The checks of the likely hypotheses (and the runner-up) read off the UI thread: they take
        about ten seconds of /proc reads, stack dumps and scrapes."""
        try:
            found = verify_report(
                f"the live window ({host})",
                window,
                analysis.report,
                self.settings.rules,
                host=self.settings.verify_host,
            )
        except Exception as error:  # noqa: BLE001 - shown as a notice; the view stays up
            self.post_message(VerifyDone(f"# verify\n\nThe checks could not run: {error}"))
            return
        self.post_message(VerifyDone(f"# verify\n\n```text\n{render(found, 'text')}```"))

    def on_verify_done(self, message: VerifyDone) -> None:
        if self._torn_down():
            return
        self.push_screen(DocumentScreen(message.text, id="verify"))

    def action_toggle_pause(self) -> None:
        self.paused = not self.paused
        if self.paused:
            self.feed.pause()
        else:
            self.feed.resume()
        self._state = self.feed.state()
        self._show_top()

    def action_next_window(self) -> None:
        index = WINDOWS.index(self.window_s) if self.window_s in WINDOWS else -1
        self.window_s = WINDOWS[(index + 1) % len(WINDOWS)]
        self._last_analysis = float("-inf")
        self.notify(f"window: {window_label(self.window_s)}", timeout=2)
        self._tick()

    def action_export_markdown(self) -> None:
        if self.report is None or self._analysed is None:
            self.notify("no analysis yet; nothing to export", severity="warning", timeout=4)
            return
        state = self._state
        path = export_path(
            self.settings.export_dir, state.host if state else "host", state.position if state else None
        )
        self._export(path, *self._analysed)

    @work(thread=True, exclusive=True, group="export")
    def _export(self, path: Path, analysis: Analysis, window: Dump) -> None:
        """The Markdown report with its pictures beside it (as file -o writes them), off the UI thread."""
        from diagnose.pictures import beside, render_pictures

        try:
            path.parent.mkdir(parents=True, exist_ok=True)  # the default folder is made on first use
            _, pictures = beside(
                path, lambda folder: render_pictures(analysis.report, analysis.spikes, window, folder)
            )
            path.write_text(render_markdown(analysis.report, pictures), encoding="utf-8")
        except OSError as error:
            self.post_message(Exported(path, error))
            return
        self.post_message(Exported(path))

    def on_exported(self, message: Exported) -> None:
        if self._torn_down():
            return
        if message.error is not None:
            self.notify(f"could not write {message.path}: {message.error}", severity="error", timeout=8)
            return
        self.exported = message.path
        self.notify(f"Markdown report written to {message.path}", title="exported", timeout=8)


def _span_of(message: Sampled) -> tuple[float, float]:
    span = message.window.span()
    return span if span else (0.0, 1.0)
