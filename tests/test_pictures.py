"""Pictures beside the Markdown report: checked on the data they plot, not on pixels."""

from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest

from diagnose.pictures.stages import stage_data
from diagnose.pictures.timeline import draw_timeline, timeline_data
from diagnose.pipeline import analyse_path
from diagnose.report.cited import cited_signals
from tests.conftest import DUMPS

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def contention():
    dump, analysis = analyse_path(str(DUMPS / "co-located-contention"))
    return dump, analysis


def test_a_markdown_report_gets_its_pictures_beside_it_linked_relatively(run_cli, tmp_path):
    out = tmp_path / "out" / "review.md"
    out.parent.mkdir()
    code, _, err = run_cli("file", DUMPS / "co-located-contention", "--format", "markdown", "-o", out)
    assert code == 0, err
    markdown = out.read_text()
    for name in ("timeline.png", "stages.png"):
        assert f"](review.assets/{name})" in markdown
        assert (tmp_path / "out" / "review.assets" / name).read_bytes().startswith(PNG)
    assert markdown.index("## Pictures") < markdown.index("## Hypotheses")
    assert f"2 pictures written to {(tmp_path / 'out' / 'review.assets').resolve()}" in err


def test_no_plots_and_stdout_give_the_report_alone(run_cli, tmp_path):
    out = tmp_path / "review.md"
    code, _, _ = run_cli(
        "file", DUMPS / "co-located-contention", "--format", "markdown", "-o", out, "--no-plots"
    )
    assert code == 0 and "## Pictures" not in out.read_text()
    assert not (tmp_path / "review.assets").exists()
    code, text, _ = run_cli("file", DUMPS / "co-located-contention", "--format", "markdown")
    assert code == 0 and "## Pictures" not in text


def test_the_timeline_plots_the_latency_signals_and_shades_the_detected_spikes(contention):
    dump, analysis = contention
    data = timeline_data(analysis.report, analysis.spikes, dump)
    p99 = analysis.spikes.findings["requests.latency_ms.p99"]
    track = next(t for t in data.latency if t.name == "requests.latency_ms.p99")
    assert np.array_equal(track.values, p99.signal.values, equal_nan=True)
    assert np.array_equal(track.times, p99.signal.times())
    reference = analysis.spikes.findings[analysis.spikes.reference]
    assert data.episodes == tuple((e.start, e.end) for e in reference.episodes if e.direction > 0)
    assert len(data.episodes) == analysis.report.fact("spikes.latency.episodes")


def test_the_timeline_shows_the_job_the_diagnosis_names_first_in_its_own_units(contention):
    dump, analysis = contention
    data = timeline_data(analysis.report, analysis.spikes, dump)
    cited = analysis.report.fact("spikes.colocated.signal")
    assert data.related[0].name == cited
    assert data.related[0].label == "GPU memory of python3 (GiB)"
    job = analysis.spikes.findings[cited].signal.values
    assert np.allclose(data.related[0].values, job / 2**30, equal_nan=True)
    aligned = {a.b for a in analysis.report.alignments}
    report, signals = analysis.report, analysis.spikes.findings
    evidence = {name for h in report.hypotheses for name in cited_signals(h, report, signals)}
    assert all(track.name in aligned | evidence | {cited} for track in data.related)


def test_the_stage_picture_shows_the_summary_shares(contention):
    _, analysis = contention
    data = stage_data(analysis.report)
    stages = analysis.report.summary.stages
    assert set(data.stages) == set(stages)
    for name, mean, tail in zip(data.stages, data.share_mean, data.share_p99, strict=True):
        assert mean == stages[name].share and tail == stages[name].tail_share
    assert list(data.share_p99) == sorted(data.share_p99, reverse=True)


def test_the_same_analysis_draws_the_same_bytes(contention, tmp_path):
    from diagnose.pictures import style

    dump, analysis = contention
    data = timeline_data(analysis.report, analysis.spikes, dump)
    for name in ("a.png", "b.png"):
        style.save(draw_timeline(data), tmp_path / name)
    assert (tmp_path / "a.png").read_bytes() == (tmp_path / "b.png").read_bytes()


def test_axes_are_labelled_with_units(contention):
    dump, analysis = contention
    figure = draw_timeline(timeline_data(analysis.report, analysis.spikes, dump))
    axes = figure.axes
    assert axes[0].get_ylabel() == "latency (ms)"
    assert axes[-1].get_xlabel() == "time (UTC)"
    assert all(axis.get_title(loc="left").endswith(")") for axis in axes[1:])


def test_a_dump_without_latency_has_no_timeline(tmp_path):
    (tmp_path / "system.csv").write_text(
        "ts,cpu_pct\n" + "".join(f"{1764547200 + i},{10 + i % 3}\n" for i in range(60))
    )
    dump, analysis = analyse_path(str(tmp_path))
    assert timeline_data(analysis.report, analysis.spikes, dump) is None
    assert stage_data(analysis.report) is None


def test_a_long_signal_is_drawn_as_its_envelope_with_every_spike_kept():
    from diagnose.pictures.timeline import envelope

    times = np.arange(86_400.0)
    values = np.random.default_rng(0).normal(100, 5, times.size)
    values[[1234, 50_000, 86_000]] = [900, 950, 990]
    values[60_000:60_500] = np.nan
    kept_t, kept_v = envelope(times, values)
    assert kept_v.size <= 4000
    assert {900, 950, 990} <= set(kept_v.tolist())
    assert np.nanmin(kept_v) == np.nanmin(values) and np.all(np.diff(kept_t) > 0)
    assert np.isnan(kept_v).any()  # the gap is still a gap


def test_an_html_report_is_one_file_with_its_pictures_inline(run_cli, tmp_path):
    out = tmp_path / "review.html"
    code, _, err = run_cli("file", DUMPS / "co-located-contention", "-o", out)
    assert code == 0 and "html report written" in err
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and page.count('<img src="data:image/png;base64,') == 2
    sources = re.findall(r'(?:src|href)="([^"]*)"', page)
    assert all(s.startswith("data:") or s.startswith("#") for s in sources), sources
    assert "<table>" in page and "<h2>Hypotheses</h2>" in page
    assert list(tmp_path.iterdir()) == [out]  # nothing beside it


def test_markup_in_the_evidence_is_shown_as_text_not_run(run_cli, tmp_path):
    folder = tmp_path / "<b onmouseover=alert(1)>x"
    folder.mkdir()
    (folder / "requests.csv").write_text(
        "ts,latency_ms\n" + "".join(f"{1764547200 + i},{50 + i % 7}\n" for i in range(200))
    )
    code, page, _ = run_cli("file", folder, "--format", "html", "--no-plots")
    assert code == 0
    assert "<b onmouseover" not in page and "&lt;b onmouseover=alert(1)&gt;x" in page


@pytest.mark.skipif(shutil.which("chromium") is None, reason="headless Chromium is not installed here")
def test_the_html_report_renders_offline_in_headless_chromium_with_its_pictures(run_cli, tmp_path):
    out = tmp_path / "review.html"
    assert run_cli("file", DUMPS / "co-located-contention", "-o", out)[0] == 0
    shot = tmp_path / "shot.png"
    subprocess.run(
        [
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--window-size=1200,2400",
            f"--screenshot={shot}",
            out.as_uri(),
        ],
        capture_output=True,
        timeout=120,
        check=True,
    )
    import matplotlib.image

    pixels = matplotlib.image.imread(shot)[..., :3]
    latency_blue = np.all(np.abs(pixels - np.array([0x1F, 0x4E, 0x9C]) / 255) < 0.06, axis=-1)
    assert latency_blue.sum() > 2000, "the timeline's latency line is not on the rendered page"


def test_a_comparison_gets_its_distribution_and_stage_pictures(run_cli, tmp_path):
    pair = DUMPS.parent / "pairs" / "pseudo-optimisation"
    out = tmp_path / "cmp.md"
    code, _, err = run_cli("compare", pair / "before", pair / "after", "-o", out)
    assert code == 0, err
    markdown = out.read_text()
    for name in ("latency-ecdf.png", "stage-changes.png"):
        assert f"](cmp.assets/{name})" in markdown
        assert (tmp_path / "cmp.assets" / name).read_bytes().startswith(PNG)
    code, page, _ = run_cli("compare", pair / "before", pair / "after", "--format", "html")
    assert code == 0 and page.count('<img src="data:image/png;base64,') == 2


def test_the_comparison_pictures_plot_the_compared_figures():
    from diagnose.compare import compare_evidence, measure_both
    from diagnose.pictures.compare import ecdf_data, stage_changes

    pair = DUMPS.parent / "pairs" / "pseudo-optimisation"
    before, after, requests = measure_both(str(pair / "before"), str(pair / "after"))
    comparison = compare_evidence(before, after, requests)
    figures = {f.name: f for f in comparison.figures}
    data = ecdf_data(comparison, before.samples["latency_ms"], after.samples["latency_ms"])
    assert data.percentiles == (
        ("p50", figures["p50"].before, figures["p50"].after),
        ("p99", figures["p99"].before, figures["p99"].after),
    )
    assert np.isclose(np.quantile(data.after, 0.99), figures["p99"].after, rtol=0.01)
    changes = stage_changes(comparison)
    forward = changes.names.index("forward P99")
    assert changes.change[forward] == figures["stage_forward_p99"].change
    assert changes.low[forward] == figures["stage_forward_p99"].low


@pytest.mark.parametrize(
    ("dump", "picture"),
    [
        ("memory-fragmentation", "memory.png"),
        ("cold-start-contamination", "cold-start.png"),
        ("batch-window-too-long", "batch-curve.png"),
        ("oversized-batch", "batch-curve.png"),
        ("queue-saturation", "queueing-curve.png"),
        ("input-length-shift", "length-shift.png"),
        ("gpu-throttling", "clocks.png"),
        ("kv-cache-pressure", "engine.png"),
        ("memory-swapping", "swap.png"),
        ("prefill-decode-interference", "interference.png"),
        ("coarse-sampling", "sampling.png"),
    ],
)
def test_a_fired_finding_gets_the_picture_of_its_evidence(run_cli, tmp_path, dump, picture):
    out = tmp_path / "review.md"
    assert run_cli("file", DUMPS / dump, "--format", "markdown", "-o", out)[0] == 0
    assert (tmp_path / "review.assets" / picture).read_bytes().startswith(PNG)
    assert f"](review.assets/{picture})" in out.read_text()


def test_the_memory_picture_plots_the_allocator_and_marks_every_oom():
    from diagnose.pictures.evidence import memory_data

    dump, analysis = analyse_path(str(DUMPS / "memory-fragmentation"))
    data = memory_data(dump)
    lines = dict(data.lines)
    allocator = dump.table("allocator")
    reserved = allocator.groupby("ts")["reserved_bytes"].sum()
    assert np.allclose(
        lines["reserved (allocator)"][np.isin(data.times, reserved.index)], reserved.to_numpy() / 2**30
    )
    events = dump.table("events")
    assert len(data.ooms) == int((events["kind"] == "oom").sum()) > 0


def test_the_cold_start_picture_marks_the_requests_the_facts_call_cold():
    from diagnose.pictures.evidence import coldstart_data

    dump, analysis = analyse_path(str(DUMPS / "cold-start-contamination"))
    data = coldstart_data(dump)
    assert int(data.cold.sum()) == analysis.report.fact("coldstart.cold_requests")
    assert np.nanmin(data.since_start_s) >= 0


def test_the_batch_curve_is_the_one_the_facts_quote_with_its_knee():
    from diagnose.pictures.evidence import batch_curve

    dump, analysis = analyse_path(str(DUMPS / "oversized-batch"))
    data = batch_curve(dump, analysis.report)
    facts = analysis.report.facts
    assert data.knee == facts["batch.knee_size"].value
    quoted = [
        float(part.split(":")[0].removeprefix("size ")) for part in facts["batch.curve"].value.split("; ")
    ]
    assert np.allclose(data.size, quoted)
    assert data.items_per_s.max() == pytest.approx(facts["batch.capacity_items_per_s"].value)


def test_the_committed_gallery_is_current_by_the_data_it_shows(tmp_path, monkeypatch):
    """Regenerate with python -m fixtures.gallery when a picture's data changes. The digests are of the
    data each picture is drawn from: the figures are drawn, not encoded as PNGs (two thirds of the time)."""
    import json

    import matplotlib.pyplot as plt

    import fixtures.gallery as gallery
    from diagnose.pictures import style

    committed = json.loads((gallery.GALLERY / "index.json").read_text())
    monkeypatch.setattr(gallery, "GALLERY", tmp_path)
    monkeypatch.setattr(style, "save", lambda figure, path: plt.close(figure))
    fresh = gallery.gallery()
    assert fresh == committed
    for key in committed:
        assert (DUMPS.parent.parent / "docs" / "gallery" / key).exists()


def test_the_queueing_curve_is_the_facts_windows_with_their_knee():
    from diagnose.pictures.evidence import queue_curve

    dump, analysis = analyse_path(str(DUMPS / "queue-saturation"))
    data = queue_curve(dump, analysis.report)
    facts = analysis.report.facts
    assert data.knee_rps == facts["queue.knee_rps"].value
    assert data.recommended_rps == pytest.approx(0.7 * data.knee_rps)
    assert np.nanmax(data.windows.rho) == pytest.approx(facts["queue.rho.max"].value)
    shape = data.windows.rho / (1 - data.windows.rho)
    residual = data.windows.wait_ms - data.fit_scale_ms * shape
    assert abs(np.dot(residual, shape)) < 1e-6 * np.dot(shape, shape) * data.fit_scale_ms  # least squares


def test_the_length_shift_picture_draws_the_line_the_facts_fitted():
    from diagnose.pictures.evidence import shift_model

    dump, analysis = analyse_path(str(DUMPS / "input-length-shift"))
    data = shift_model(dump, analysis.report)
    facts = analysis.report.facts
    assert data.split == facts["latency.shift_at"].value and not data.tail
    predicted = np.median(data.intercept + data.slope * data.input_len[data.after])
    actual = np.median(data.served_ms[data.after])
    assert actual / predicted == pytest.approx(facts["latency.unexplained_ratio"].value)


def test_a_shift_in_the_tail_is_drawn_at_the_p95s_split(tmp_path):
    from diagnose.pictures.evidence import shift_model
    from fixtures.variations import VARIATIONS, write_variation

    (tail,) = [v for v in VARIATIONS if v.name == "input-shift-in-the-tail"]
    dump, analysis = analyse_path(str(write_variation(tail, tmp_path / "tail", seed=3)))
    data = shift_model(dump, analysis.report)
    assert data.tail and data.split == analysis.report.fact("latency.tail_shift_at")
    # the long prompts are after the split only
    assert data.input_len[data.after].max() > 2 * data.input_len[data.before].max()


def test_the_clock_picture_shows_the_facts_throttled_seconds():
    from diagnose.pictures.evidence import clock_data

    dump, analysis = analyse_path(str(DUMPS / "gpu-throttling-power-cap"))
    data = clock_data(dump)
    facts = analysis.report.facts
    assert dump.table("gpu")["gpu"].nunique() == 1  # one GPU: per second is per row
    assert data.throttled.mean() == pytest.approx(facts["gpu.throttled_share"].value)
    assert np.median(data.clock_share) == pytest.approx(facts["gpu.sm_clock_ratio.p50"].value)


def test_every_rule_has_a_picture_of_its_evidence():
    from diagnose.judge import default_rules_dir, load_rules
    from diagnose.pictures import EVIDENCE, SHOWN_BY_STAGES, SHOWN_BY_TIMELINE

    ids = {rule.id for rule in load_rules(default_rules_dir())}
    unshown = ids - set(EVIDENCE) - SHOWN_BY_TIMELINE - SHOWN_BY_STAGES
    assert not unshown, f"no picture of their evidence: {sorted(unshown)} (docs/extending.md#a-rule)"
    assert not (set(EVIDENCE) & (SHOWN_BY_TIMELINE | SHOWN_BY_STAGES))


def test_the_timeline_says_which_finding_it_is_the_evidence_of(run_cli, tmp_path):
    out = tmp_path / "review.md"
    run_cli("file", DUMPS / "co-located-contention", "--format", "markdown", "-o", out)
    assert "**Timeline: the evidence of co-located-contention**" in out.read_text()


def test_the_engine_and_swap_pictures_plot_the_recorded_series():
    from diagnose.pictures.evidence import engine_panel, swap_panel

    dump, _ = analyse_path(str(DUMPS / "kv-cache-pressure"))
    rows = dict(engine_panel(dump).rows)
    kv = dict((label, values) for label, _, values in rows["KV cache used (%)"])["KV cache"]
    assert np.allclose(kv, dump.table("server").groupby("ts")["kv_cache_usage_pct"].max().to_numpy())
    dump, _ = analyse_path(str(DUMPS / "memory-swapping"))
    rows = dict(swap_panel(dump).rows)
    used = rows["swap used (GiB)"][0][2]
    assert used.max() == pytest.approx(dump.table("system")["swap_used_bytes"].max() / 2**30)


def test_the_interference_picture_compares_the_requests_the_facts_compared():
    from diagnose.pictures.evidence import interference_data

    dump, analysis = analyse_path(str(DUMPS / "prefill-decode-interference"))
    data = interference_data(dump)
    facts = analysis.report.facts
    assert data.ratio == pytest.approx(facts["tpot.long_prefill_ratio"].value)
    assert data.threshold_tokens == facts["llm.long_prompt_tokens"].value
    share = data.during_relative.size / (data.during_relative.size + data.clear_relative.size)
    assert share == pytest.approx(facts["tpot.long_prefill_share"].value)
    # The minute drawn: its bars start inside it, and a bar marked as overlapped has a long prefill within it.
    assert ((data.first >= data.window[0]) & (data.first < data.window[1])).all()
    crossing = [
        ((data.long_prefills > a) & (data.long_prefills <= b)).any()
        for a, b in zip(data.first, data.last, strict=True)
    ]
    assert np.array_equal(np.array(crossing), data.overlapped)
    assert data.overlapped.any() and (~data.overlapped).any()


def test_a_healthy_llm_service_gets_no_evidence_picture(run_cli, tmp_path):
    out = tmp_path / "review.md"
    assert run_cli("file", DUMPS / "llm-healthy", "--format", "markdown", "-o", out)[0] == 0
    drawn = {path.name for path in (tmp_path / "review.assets").iterdir()}
    assert drawn <= {"timeline.png", "stages.png"}


def test_the_sampling_picture_shows_each_series_at_its_own_interval():
    from diagnose.pictures.evidence import SPIKE_S, sampling_data

    dump, analysis = analyse_path(str(DUMPS / "coarse-sampling"))
    data = sampling_data(dump)
    assert data.rows[0][1] == analysis.report.fact("sampling.interval_s")  # the finest first
    for name, interval, times in data.rows:
        assert interval == dump.median_interval(name)
        assert np.allclose(np.diff(times), interval)
    assert data.spike[1] - data.spike[0] == SPIKE_S
    assert data.has_requests is False


def test_a_report_with_nothing_to_draw_leaves_no_empty_pictures_folder(run_cli, tmp_path):
    dump = tmp_path / "host-only"
    dump.mkdir()
    rows = "\n".join(f"{1764460800 + i},{20 + i % 7}" for i in range(120))
    (dump / "system.csv").write_text("ts,cpu_pct\n" + rows + "\n")
    code, _, err = run_cli("file", dump, "-o", tmp_path / "review.md")
    assert code == 0, err
    assert (tmp_path / "review.md").exists() and not (tmp_path / "review.assets").exists()


def test_a_queue_depth_is_counted_not_timed():
    from diagnose.pictures.timeline import _unit

    assert _unit("server.queue_depth")[1] == "count" and _unit("server.running")[1] == "count"
    assert _unit("requests.stage_forward_ms.mean")[1] == "ms" and _unit("server.ttft_ms")[1] == "ms"


def test_the_time_axis_is_bounded_to_the_evidence_and_an_earlier_start_is_marked_at_its_edge():
    """A 40-minute dump whose server started two hours earlier left three quarters of each panel empty."""
    import numpy as np

    from diagnose.pictures.timeline import TimelineData, Track

    times = 1_764_460_800.0 + np.arange(0, 2400, 10.0)
    track = Track(
        "requests.latency_ms.p99", "latency p99", "latency p99 (ms)", times, np.full(times.size, 100.0), ()
    )
    data = TimelineData((track,), (), (), (), ((times[0] - 7200, "start"), (times[0] + 600, "restart")))
    figure = draw_timeline(data)
    import matplotlib.dates as mdates

    low, high = (mdates.num2date(x).timestamp() for x in figure.axes[0].get_xlim())
    assert (low, high) == pytest.approx((times[0], times[-1]))
    labels = [text.get_text() for text in figure.axes[0].texts]
    assert "restart" in labels and any(label.startswith("start ") and label.endswith("←") for label in labels)


def test_the_timeline_draws_the_signal_a_cpu_bound_finding_cites():
    """The recorded cpu-bound-stage run: the finding cites the tokenize stage's time, and the timeline
    draws it under the latency (it used to say "no aligned signal")."""
    dump, analysis = analyse_path(str(DUMPS.parent / "recorded" / "cpu-bound-stage" / "dump"), helper=False)
    assert analysis.report.hypotheses[0].id == "cpu-bound-stage"
    data = timeline_data(analysis.report, analysis.spikes, dump)
    assert "requests.stage_tokenize_ms.mean" in [track.name for track in data.related]


def test_the_timeline_names_a_cited_process_by_its_command():
    dump, analysis = analyse_path(str(DUMPS / "cpu-bound-stage"), helper=False)
    data = timeline_data(analysis.report, analysis.spikes, dump)
    assert "busiest thread of python (pid 4242)" in [track.words for track in data.related]
