"""The live view, driven headless with Textual's Pilot on replayed fixtures."""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from diagnose.collectors.recorder import RecordOptions
from diagnose.detect.analysis import SpikeAnalysis
from diagnose.detect.episodes import Episode
from diagnose.detect.search import SignalFindings
from diagnose.detect.signals import Signal
from diagnose.dump import load_dump
from diagnose.judge import default_rules_dir, load_rules
from diagnose.live.app import DocumentScreen, LiveApp, LiveSettings
from diagnose.live.chart import SeriesChart
from diagnose.live.feed import LiveFeed, ReplayFeed
from diagnose.live.panels import EpisodeMark, episodes
from diagnose.report.cited import cited_signals
from tests.conftest import DUMPS

RULES = load_rules(default_rules_dir())


def _app(dump_path: Path, tmp_path: Path, speed: float = 0.0, window_s: float | None = None) -> LiveApp:
    feed = ReplayFeed(load_dump(str(dump_path)), speed=speed, from_start=speed > 0)
    return LiveApp(feed, LiveSettings(RULES, window_s=window_s, refresh_s=0.5, export_dir=tmp_path))


async def _until(pilot, condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting for the view"
        await pilot.pause(0.1)


def _visible_text(app: LiveApp) -> str:
    return "\n".join(str(widget.render()) for widget in app.screen.query("Static, SeriesChart"))


def test_replayed_incident_shows_its_cause_opens_it_and_exports_the_same_markdown(tmp_path, run_cli):
    dump = DUMPS / "co-located-contention"

    async def drive() -> tuple[LiveApp, str]:
        app = _app(dump, tmp_path)
        async with app.run_test(size=(180, 50)) as pilot:
            await _until(pilot, lambda: app.report is not None)
            assert app.report.hypotheses[0].id == "co-located-contention"
            assert app.report.hypotheses[0].score >= 0.5
            await pilot.press("enter")
            await _until(pilot, lambda: isinstance(app.screen, DocumentScreen))
            shown = app.screen.markdown
            await pilot.press("escape")
            await pilot.press("m")
            await _until(pilot, lambda: app.exported is not None)
            return app, shown

    app, shown = asyncio.run(drive())
    end = load_dump(str(dump)).span()[1]  # named by the time it shows, the dump's own, not today's
    assert time.strftime("%Y%m%d-%H%M%S", time.gmtime(end)) in app.exported.name
    hypothesis = app.report.hypotheses[0]
    assert "**Verify**" in shown and hypothesis.verify[0] in shown and hypothesis.remedy[0] in shown
    cli = tmp_path / "cli" / app.exported.name  # the same name: the same relative picture links
    cli.parent.mkdir()
    code, _, _ = run_cli("file", dump, "--format", "markdown", "-o", cli)
    assert code == 0
    assert app.exported.parent == tmp_path
    assert app.exported.read_text(encoding="utf-8") == cli.read_text(encoding="utf-8")
    assets = tmp_path / f"{app.exported.stem}.assets"
    assert sorted(p.name for p in assets.iterdir()) == sorted(
        p.name for p in (cli.parent / assets.name).iterdir()
    )


def test_charts_mark_the_periodic_episodes_and_the_cited_process(tmp_path):
    async def drive() -> LiveApp:
        app = _app(DUMPS / "co-located-contention", tmp_path)
        async with app.run_test(size=(180, 60)) as pilot:
            await _until(pilot, lambda: app.report is not None)
            await pilot.pause(0.3)
            charts = {chart.key: chart for chart in app.screen.query(SeriesChart)}
            latency = str(charts["requests.latency_ms.p99"].render())
            assert latency.count("━") >= 5 and "episode" in latency
            assert any(key.startswith("gpu_processes.mem_used_bytes[") for key in charts)
            return app

    asyncio.run(drive())


def test_pause_stops_updates_and_resume_restarts_them(tmp_path):
    async def drive() -> None:
        app = _app(DUMPS / "healthy-steady", tmp_path, speed=30.0, window_s=300.0)
        async with app.run_test(size=(160, 50)) as pilot:
            await _until(pilot, lambda: app.samples >= 2 and app.analyses >= 1)
            await pilot.press("p")
            await pilot.pause(0.2)
            samples, analyses, position = app.samples, app.analyses, app.feed.position()
            await pilot.pause(2.5)
            assert (app.samples, app.analyses) == (samples, analyses)
            assert app.feed.position() == position
            assert "paused" in str(app.query_one("#top").render())
            await pilot.press("p")
            await _until(pilot, lambda: app.samples > samples)
            assert app.feed.position() > position

    asyncio.run(drive())


def test_no_gpu_is_said_and_everything_else_works(tmp_path):
    source = pd.read_csv(DUMPS / "healthy-steady" / "requests.csv")
    source.to_csv(tmp_path / "requests.csv", index=False)
    pd.read_csv(DUMPS / "healthy-steady" / "system.csv").to_csv(tmp_path / "system.csv", index=False)
    exports = tmp_path / "out"
    exports.mkdir()

    async def drive() -> None:
        app = _app(tmp_path, exports)
        async with app.run_test(size=(160, 50)) as pilot:
            await _until(pilot, lambda: app.report is not None)
            await pilot.pause(0.3)
            text = _visible_text(app)
            assert "no GPU" in str(app.query_one("#top").render())
            assert "no GPU here: this dump has no GPU table" in text
            assert "latency P99" in text and "host CPU" in text
            assert not [h for h in app.report.hypotheses if h.score >= 0.5]

    asyncio.run(drive())


def test_an_analysis_error_is_a_notice_not_a_crash(tmp_path, monkeypatch):
    def broken(*_args, **_kwargs):
        raise RuntimeError("rule engine exploded")

    monkeypatch.setattr("diagnose.live.app.analyse_dump", broken)

    async def drive() -> None:
        app = _app(DUMPS / "healthy-steady", tmp_path)
        async with app.run_test(size=(160, 50)) as pilot:
            await _until(pilot, lambda: any("exploded" in str(n.message) for n in app._notifications))
            assert app.is_running and app.report is None
            await pilot.press("m")  # nothing to export yet: said, not raised
            await pilot.press("q")

    asyncio.run(drive())


def test_window_key_cycles_and_help_and_not_fired_screens_open(tmp_path):
    async def drive() -> None:
        app = _app(DUMPS / "healthy-steady", tmp_path, window_s=300.0)
        async with app.run_test(size=(160, 50)) as pilot:
            await _until(pilot, lambda: app.report is not None)
            await pilot.press("w")
            assert app.window_s == 900.0
            await pilot.press("question_mark")
            await _until(pilot, lambda: app.screen.id == "help")
            assert "`m`" in app.screen.markdown
            await pilot.press("escape")
            await pilot.press("o")
            await _until(pilot, lambda: app.screen.id == "not-fired")
            assert "## Ruled out" in app.screen.markdown

    asyncio.run(drive())


def test_replay_clock_runs_at_its_speed_and_stops_while_paused():
    now = [100.0]
    dump = load_dump(str(DUMPS / "healthy-steady"))
    feed = ReplayFeed(dump, speed=10.0, clock=lambda: now[0])
    start = feed.position()
    now[0] += 3
    assert feed.position() == pytest.approx(start + 30)
    feed.pause()
    now[0] += 50
    assert feed.position() == pytest.approx(start + 30)
    feed.resume()
    now[0] += 1
    assert feed.position() == pytest.approx(start + 40)
    window = feed.window(20.0)
    assert window.span()[0] >= start + 20 and window.span()[1] <= start + 40
    now[0] += 10_000
    assert feed.state().finished and feed.position() == dump.span()[1]


def test_a_replay_window_ends_with_its_last_complete_second_at_any_speed():
    """At 60x the clock is mid-second on every refresh: the second under way would read as a drop in
    throughput ("now 1.0/s") and a minimum no second had."""
    from diagnose.detect.signals import build_signals

    dump = load_dump(str(DUMPS / "healthy-steady"))
    for speed in (20.0, 60.0, 7.3):
        now = [0.0]
        feed = ReplayFeed(dump, speed=speed, clock=lambda now=now: now[0])
        now[0] = 95.55 / speed  # the replay 95.55 s in
        position = feed.position()
        window = feed.window(60.0)
        assert window.span()[1] < math.floor(position)
        throughput = {s.name: s for s in build_signals(window, ())}["requests.throughput_rps"]
        ts = dump.tables["requests"]["ts"]
        last = ts[(ts >= math.floor(position) - throughput.step) & (ts < math.floor(position))]
        assert throughput.values[-1] == pytest.approx(len(last) / throughput.step)
    finished = ReplayFeed(dump, from_start=False)
    assert finished.window(None) is dump  # at the end: the whole file, as diagnose file reads it


def test_a_window_holding_everything_is_the_dump_itself():
    dump = load_dump(str(DUMPS / "healthy-steady"))
    first, last = dump.span()
    assert dump.between(first, last) is dump
    cut = dump.between(first + 60, first + 120)
    assert all(frame["ts"].between(first + 60, first + 120).all() for frame in cut.tables.values())
    assert len(dump.tables["requests"]) > len(cut.tables["requests"]) > 0


def _wait_for_samples(feed: LiveFeed, count: int = 2, timeout_s: float = 10) -> None:
    """Until the feed holds ``count`` host samples, or ``timeout_s`` passed (the asserts then say)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and len(feed.window(60).tables.get("system", [])) < count:
        time.sleep(0.2)


def test_live_feed_samples_the_host_into_windows(tmp_path):
    feed = LiveFeed(RecordOptions(output=tmp_path / "rec", interval_s=0.5, gpu=False))
    feed.start()
    try:
        _wait_for_samples(feed)
        window = feed.window(60)
        state = feed.state()
    finally:
        feed.close()
    assert len(window.tables["system"]) >= 2 and "cpu_pct" in window.tables["system"].columns
    assert state.mode == "live" and not state.gpus and "turned off" in state.gpu_note
    assert (tmp_path / "rec" / "system.csv").exists()  # --record writes the same samples to disk
    assert load_dump(str(tmp_path / "rec")).tables["system"]["ts"].size >= 2


@pytest.mark.parametrize(
    ("fixture", "cause", "cited", "not_cited"),
    [
        ("gpu-throttling", "gpu-throttling", "gpu.sm_clock_mhz[gpu=0]", "gpu_processes.mem_used_bytes"),
        (
            "co-located-contention",
            "co-located-contention",
            "gpu_processes.mem_used_bytes[name=python3]",
            "gpu.sm_",
        ),
    ],
)
def test_cited_signals_are_the_ones_the_evidence_facts_came_from(fixture, cause, cited, not_cited):
    from diagnose.detect.signals import build_signals
    from diagnose.pipeline import analyse_path

    dump, analysis = analyse_path(str(DUMPS / fixture))
    signals = {s.name: s for s in build_signals(dump, dump.server_pids)}
    assert any(name.startswith(not_cited) for name in signals)  # there, and not what the evidence is about
    [hypothesis] = [h for h in analysis.report.hypotheses if h.id == cause]
    found = cited_signals(hypothesis, analysis.report, signals)
    assert cited in found
    assert not any(name.startswith(not_cited) for name in found)


def test_chart_marks_come_from_the_analysis_with_the_routine_ones_told_apart():
    signal = Signal("x", "process", 0.0, 1.0, np.zeros(10))
    found = [Episode(100.0 * i, 100.0 * i + 10, 5.0, 1.0, 1) for i in range(3)]
    spikes = SpikeAnalysis(findings={"x": SignalFindings(signal, [], found, None, [True, False, True])})
    assert episodes(spikes, "x") == [
        EpisodeMark(0.0, 10.0, True),
        EpisodeMark(100.0, 110.0, False),
        EpisodeMark(200.0, 210.0, True),
    ]
    assert episodes(spikes, "y") == [] and episodes(None, "x") == []


def test_view_arguments_are_checked_before_the_screen_opens(run_cli, tmp_path):
    code, _, err = run_cli("file", DUMPS / "healthy-steady", "--tui", "--export-dir", tmp_path / "missing")
    assert code == 2 and "--export-dir" in err
    code, _, err = run_cli("live", "--replay", DUMPS / "healthy-steady", "--record", tmp_path / "rec")
    assert code == 2 and "--record" in err
    code, _, err = run_cli("live", "--replay", DUMPS / "healthy-steady", "--window", "soon")
    assert code == 2 and "duration" in err


def test_a_sampler_that_stops_says_why_instead_of_dying_silently(monkeypatch):
    def broken(*_args, **_kwargs):
        raise RuntimeError("the request log vanished")

    monkeypatch.setattr("diagnose.live.feed.record", broken)
    feed = LiveFeed(RecordOptions(output=None, gpu=False))
    feed.start()
    feed.close()
    assert feed.messages() == ["sampling stopped: the request log vanished"]
    assert feed.messages() == []


def test_a_live_view_warns_about_a_dead_source_and_its_report_lists_it(tmp_path):
    from diagnose.judge import default_rules_dir, load_rules
    from diagnose.pipeline import analyse_dump
    from diagnose.report.evidence_lines import dead_source_lines

    missing = tmp_path / "requests.jsonl"
    feed = LiveFeed(RecordOptions(output=None, interval_s=0.5, gpu=False, requests_log=str(missing)))
    feed.start()
    try:
        _wait_for_samples(feed)
        window = feed.window(60)
        said = feed.messages()
    finally:
        feed.close()
    assert any("request log" in line and "no such file" in line for line in said)
    report = analyse_dump(window, load_rules(default_rules_dir())).report
    assert dead_source_lines(report.evidence) == [
        f"request log {missing}: never reached (no such file or directory)"
    ]


def test_a_timer_that_fires_after_the_view_closed_touches_nothing(tmp_path):
    """On a loaded machine the 1 s tick can run after the screen's widgets are gone."""
    app = _app(DUMPS / "healthy-steady", tmp_path)

    async def drive() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await _until(pilot, lambda: app.samples > 0)

    asyncio.run(drive())
    assert app._torn_down()
    app._tick()  # raised NoMatches('#top') before the guard


def test_a_rate_is_shown_over_whole_intervals_only():
    """The second still running, and the one the window starts inside, are counted over part of their
    span: a service at 15 requests/s must not read "now 1.0/s" a tenth of a second into a second."""
    import numpy as np

    from diagnose.detect.signals import Signal

    values = np.array([3.0, 15.0, 15.0, 14.0, 1.0])  # bins from 99.5 s; the first and last are cut
    chart = SeriesChart("requests.throughput_rps", "throughput")
    chart.show(Signal("requests.throughput_rps", "throughput", 99.5, 1.0, values), (100.2, 103.6), [])
    shown = str(chart.render())
    assert "now 14.0/s" in shown and "min 14.0/s" in shown and "max 15.0/s" in shown
    latency = SeriesChart("requests.latency_ms.p99", "P99")  # a percentile of a cut bin is still one
    latency.show(Signal("requests.latency_ms.p99", "latency", 99.5, 1.0, values), (100.2, 103.6), [])
    assert "now 1.0 ms" in str(latency.render())


@pytest.mark.parametrize("key", ["ctrl+c", "q"])
def test_ctrl_c_quits_as_the_help_says_even_while_replaying(tmp_path, key):
    async def drive() -> bool:
        app = _app(DUMPS / "healthy-steady", tmp_path, speed=30.0, window_s=300.0)
        async with app.run_test(size=(120, 40)) as pilot:
            await _until(pilot, lambda: app.samples >= 1)
            await pilot.press(key)
            await pilot.pause(0.3)
            return app.is_running

    assert asyncio.run(drive()) is False


def test_a_view_with_no_latencies_says_why_where_the_findings_would_be(tmp_path):
    """The reason the recording gives (the request log never reached) beside the empty findings, not
    only behind the `o` key."""
    import yaml

    dump = tmp_path / "rec"
    dump.mkdir()
    rows = "\n".join(f"{1764460800 + i},{20 + i % 7}" for i in range(60))
    (dump / "system.csv").write_text("ts,cpu_pct\n" + rows + "\n")
    sources = {
        "requests_log": {"kind": "request log", "target": "/var/log/app.jsonl", "status": "never reached"},
        "metrics": {"kind": "metrics endpoint", "target": "http://127.0.0.1:9/metrics", "status": "lost"},
    }
    (dump / "manifest.yaml").write_text(yaml.safe_dump({"format": "diagnose-dump/1", "sources": sources}))
    exports = tmp_path / "out"
    exports.mkdir()

    async def drive() -> None:
        app = _app(dump, exports)
        async with app.run_test(size=(160, 50)) as pilot:
            await _until(pilot, lambda: app.report is not None)
            await pilot.pause(0.3)
            detail = str(app.query_one("#detail").render())
            assert (
                "No request latencies in the dump: the request log /var/log/app.jsonl was never reached"
                in detail
            )
            assert "metrics endpoint http://127.0.0.1:9/metrics: lost" in detail
            assert detail.count("/var/log/app.jsonl") == 1

    asyncio.run(drive())


def test_the_export_lands_in_the_users_state_folder_unless_told(tmp_path, monkeypatch):
    """Not the folder the view was started in (a git clone, the replayed dump's folder)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)
    feed = ReplayFeed(load_dump(str(DUMPS / "healthy-steady")), speed=0.0, from_start=False)
    app = LiveApp(feed, LiveSettings(RULES, window_s=None, refresh_s=0.5))

    async def drive() -> None:
        async with app.run_test(size=(160, 50)) as pilot:
            await _until(pilot, lambda: app.report is not None)
            await pilot.press("m")
            await _until(pilot, lambda: app.exported is not None)

    asyncio.run(drive())
    assert app.exported.parent == tmp_path / "state" / "diagnose" / "exports"
    assert app.exported.is_file() and [p.name for p in tmp_path.iterdir()] == ["state"]


class _ThisHost(ReplayFeed):
    """A recording shown as if sampled on this host now: what a live view is to the `v` key."""

    def state(self):
        return replace(super().state(), mode="live")


def test_the_verify_key_runs_the_checks_on_this_host_and_only_in_a_live_view(tmp_path):
    from tests.test_verify import _host

    hot = [{"gpu": 0, "util_pct": 92, "sm_clock_mhz": 1190, "max_sm_clock_mhz": 1980,
            "throttle_reasons": "sw_thermal_slowdown"}]  # fmt: skip
    dump = load_dump(str(DUMPS / "gpu-throttling"))
    settings = LiveSettings(
        RULES, window_s=None, refresh_s=0.5, export_dir=tmp_path, verify_host=_host(tmp_path, gpus=hot)
    )

    async def drive(app: LiveApp) -> tuple[str | None, str, list[str]]:
        async with app.run_test(size=(160, 50)) as pilot:
            await _until(pilot, lambda: app.report is not None)
            await pilot.press("v")
            await _until(
                pilot,
                lambda: (
                    app.screen.id == "verify"
                    or any("recording" in str(n.message) for n in app._notifications)
                ),
            )
            shown = getattr(app.screen, "markdown", "")
            return app.screen.id, shown, [str(n.message) for n in app._notifications]

    screen, shown, _ = asyncio.run(drive(LiveApp(_ThisHost(dump, speed=0.0, from_start=False), settings)))
    assert screen == "verify" and "gpu-throttling" in shown
    assert "[confirms]" in shown and "GPU 0: sw_thermal_slowdown" in shown
    screen, _, notices = asyncio.run(drive(LiveApp(ReplayFeed(dump, speed=0.0, from_start=False), settings)))
    assert screen != "verify"  # a recording is not this host: said, not verified
    assert any("diagnose verify DUMP" in notice for notice in notices)


def test_the_verify_key_on_a_window_with_no_finding_says_so_and_runs_nothing(tmp_path):
    dump = load_dump(str(DUMPS / "healthy-steady"))
    settings = LiveSettings(RULES, window_s=None, refresh_s=0.5, export_dir=tmp_path)
    app = LiveApp(_ThisHost(dump, speed=0.0, from_start=False), settings)

    async def drive() -> tuple[str | None, list[str]]:
        async with app.run_test(size=(160, 50)) as pilot:
            await _until(pilot, lambda: app.report is not None)
            await pilot.press("v")
            await _until(
                pilot, lambda: any("nothing to verify" in str(n.message) for n in app._notifications)
            )
            return app.screen.id, [str(n.message) for n in app._notifications]

    screen, notices = asyncio.run(drive())
    assert screen != "verify" and not any("verifying" in notice for notice in notices)


def test_the_cited_charts_are_named_in_words_and_only_the_processes_the_evidence_names():
    from diagnose.detect.signals import build_signals, process_commands, signal_words
    from diagnose.pipeline import analyse_path
    from diagnose.report.cited import cited_signals

    dump, analysis = analyse_path(str(DUMPS / "cpu-bound-stage"), helper=False)
    signals = {s.name: s for s in build_signals(dump)}
    top = analysis.report.hypotheses[0]
    cited = cited_signals(top, analysis.report, signals)
    processes = [name for name in cited if name.startswith("processes.")]
    others = [name for name in signals if name.startswith("processes.") and "4242" not in name]
    assert processes and all("pid=4242" in name for name in processes) and others  # other processes exist
    assert "busiest thread of pid 4242" in [signal_words(name) for name in cited]
    # the process named by its command where the dump says it (issue 59, item 9)
    assert "busiest thread of python (pid 4242)" in [
        signal_words(name, process_commands(dump.tables)) for name in cited
    ]
