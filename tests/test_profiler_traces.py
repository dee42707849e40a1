"""PyTorch profiler traces: read by content, streamed, measured as the shared README measures them."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from diagnose.dump import load_dump
from diagnose.facts import compute_facts
from diagnose.importers import recognise
from fixtures.kernel_trace import TracedModel, simulate_trace
from tests.conftest import SHARED_DATA

TRACES = SHARED_DATA / "real-samples" / "profiler-traces"
needs_traces = pytest.mark.skipif(
    not TRACES.is_dir(), reason="../shared/data/real-samples/profiler-traces absent"
)


def _readme_rows() -> dict[str, dict[str, str]]:
    """The README's table, by file stem: what each trace shows, measured from its events."""
    lines = (TRACES / "README.md").read_text(encoding="utf-8").splitlines()
    header = next(line for line in lines if line.startswith("| file |"))
    names = [cell.strip() for cell in header.strip("|").split("|")]
    rows = {}
    for line in lines[lines.index(header) + 2 :]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        rows[cells[0]] = dict(zip(names, cells, strict=True))
    return rows


def _trace_named(stem: str) -> Path:
    stem = stem.removesuffix("...")
    return next(p for p in sorted(TRACES.glob("*.gz")) if p.name.startswith(stem))


@needs_traces
@pytest.mark.parametrize(
    "trace", sorted(TRACES.glob("*.gz")) if TRACES.is_dir() else [], ids=lambda p: p.name[:40]
)
def test_every_real_trace_is_read_with_rows_and_no_error(trace):
    dump = load_dump(str(trace))
    assert dump.importers[0]["importer"] == "pytorch-profiler-trace"
    assert dump.importers[0]["rows"] > 0
    assert not [w for w in dump.warnings if "not read" in w or "This is a bug" in w]
    facts = compute_facts(dump)
    assert not facts.warnings


@needs_traces
def test_kernel_counts_busy_share_and_short_kernels_agree_with_the_readme():
    """Where the README gives a figure for one file (the before/after pair shares a row), ours must
    agree: kernels exactly, busy and short shares to the percent, the median to the microsecond."""
    checked = 0
    for stem, row in _readme_rows().items():
        if "/" in stem or not re.fullmatch(r"[\d,]+", row["kernels"]) or row["kernels"] == "0":
            continue
        facts = compute_facts(load_dump(str(_trace_named(stem))))
        assert facts.number("trace.kernels") == int(row["kernels"].replace(",", ""))
        busy = re.fullmatch(r"([\d.]+) %", row["GPU busy"])
        if busy:
            assert facts.number("trace.gpu_busy_share") * 100 == pytest.approx(float(busy.group(1)), abs=1.0)
        short = re.fullmatch(r"(\d+) %", row["kernels < 10 us"])
        if short:
            assert facts.number("trace.short_kernel_share") * 100 == pytest.approx(
                float(short.group(1)), abs=1.0
            )
        median = re.fullmatch(r"(\d+) us", row["median kernel"])
        if median:
            assert facts.number("trace.kernel_median_us") == pytest.approx(float(median.group(1)), abs=1.0)
        checked += 1
    assert checked >= 4


@needs_traces
def test_tiny_kernels_on_a_gpu_that_idles_with_work_queued_are_a_dependency_not_the_host(report_of):
    """6,080 kernels of median 4 µs, the GPU idle 68 % of the span. Yet kernels start a median 164 ms
    after their launch returned: the host runs most of a step ahead, and 83 % of the idle time the
    kernel that ends the idle stretch had been issued before it began (the GEMMs after each 70 ms
    stretch, 65 ms before). Neither the launches nor the host's blocking copies are what the GPU waits
    on (the host blocks because the GPU is behind); something outside the kernels holds the stream."""
    report = report_of(_trace_named("negative_queue_length_values_check"))
    first = report["hypotheses"][0]
    assert first["id"] == "gpu-waits-on-dependency" and first["score"] >= 0.5
    assert all(line["sources"] for line in first["evidence"])
    ruled_out = {r["id"] for r in report["ruled_out"]}
    assert {"unfused-operators", "host-sync-in-step"} <= ruled_out
    facts = report["facts"]
    assert facts["trace.idle_queued_share"]["value"] > 0.75
    assert facts["trace.queue_wait_median_us"]["value"] > 100_000


def test_an_idle_stretch_is_queued_only_where_its_next_kernel_was_issued_before_it_began(tmp_path):
    """The same GEMM-heavy step (the host far ahead) with a wait on an event nothing in the trace
    records, against with a data loader's wait each step: both leave the GPU idle a third of the time,
    but only the first with work queued."""
    queued = {}
    for name, model in (
        ("event", TracedModel(small_ops=20, gemm_ops=60, gemm_kernel_us=150, event_wait_us=6_000)),
        ("loader", TracedModel(small_ops=20, gemm_ops=60, gemm_kernel_us=150, data_wait_us=20_000)),
    ):
        facts = compute_facts(load_dump(str(_write(tmp_path / f"{name}.json.gz", simulate_trace(model, 3)))))
        assert facts.number("trace.gpu_busy_share") < 0.7
        queued[name] = facts.number("trace.idle_queued_share")
    assert queued["event"] > 0.9 and queued["loader"] < 0.01


def test_the_busy_share_is_measured_step_by_step_too(tmp_path):
    """Steps alike: each step's share is the span's; a data loader's wait at each step's start makes
    every step less busy, and the median step says so as the span does."""
    shares = {}
    for name, model in (("alike", TracedModel()), ("waiting", TracedModel(data_wait_us=30_000))):
        facts = compute_facts(
            load_dump(str(_write(tmp_path / f"{name}.json.gz", simulate_trace(model, seed=2))))
        )
        p50, least = facts.number("trace.step_busy_share.p50"), facts.number("trace.step_busy_share.min")
        assert least <= p50 <= 1.0
        assert p50 == pytest.approx(facts.number("trace.gpu_busy_share"), abs=0.05)
        shares[name] = p50
    assert shares["waiting"] < 0.6 < 0.95 < shares["alike"]


@needs_traces
def test_a_trace_with_the_gpu_kept_busy_gets_no_finding(report_of):
    report = report_of(_trace_named("ns_resolution_trace"))
    assert "unfused-operators" in {r["id"] for r in report["ruled_out"]}
    assert all(h["score"] < 0.5 for h in report["hypotheses"])


def _write(path: Path, document: object, gzipped: bool = True) -> Path:
    data = json.dumps(document).encode("utf-8")
    if gzipped:
        path.write_bytes(gzip.compress(data))
    else:
        path.write_bytes(data)
    return path


def test_a_trace_is_recognised_by_its_content_not_its_name(tmp_path):
    document = simulate_trace(TracedModel(steps=2), seed=1)
    plain = _write(tmp_path / "whatever.txt", document, gzipped=False)
    packed = _write(tmp_path / "profile.bin", document)
    for path in (plain, packed):
        dump = load_dump(str(path))
        assert dump.importers[0]["importer"] == "pytorch-profiler-trace"
        assert set(dump.traces) == {"gpu_activity", "host_calls"}
        assert not dump.tables  # the trace's clock is not epoch seconds: never mixed with time series


def test_a_bare_list_of_chrome_trace_events_is_read(tmp_path):
    events = simulate_trace(TracedModel(steps=2), seed=1)["traceEvents"]
    dump = load_dump(str(_write(tmp_path / "trace.json", events, gzipped=False)))
    kernels = dump.traces["gpu_activity"]
    assert (kernels["kind"] == "kernel").sum() == 2 * (60 + 40)


def test_a_trace_cut_short_keeps_what_came_before_and_says_so(tmp_path):
    data = json.dumps(simulate_trace(TracedModel(steps=4), seed=1)).encode("utf-8")
    cut = tmp_path / "trace.json.gz"
    cut.write_bytes(gzip.compress(data)[: len(gzip.compress(data)) * 2 // 3])
    dump = load_dump(str(cut))
    assert 0 < len(dump.traces["gpu_activity"]) < 4 * 100
    assert any("ends early" in w and "read what came before the cut" in w for w in dump.warnings)


def test_steps_and_copies_are_read_from_the_events(tmp_path):
    model = TracedModel(steps=3, copy_bytes=1e6, pageable=True, syncs_per_step=2)
    dump = load_dump(str(_write(tmp_path / "t.json.gz", simulate_trace(model, seed=2))))
    calls, activity = dump.traces["host_calls"], dump.traces["gpu_activity"]
    assert sorted(calls["step"].dropna().unique()) == [0, 1, 2]
    copies = activity[activity["kind"] == "memcpy"]
    pageable = copies[copies["copy_kind"] == "HtoD"]
    assert len(pageable) == 3 and not pageable["pinned"].any() and (pageable["bytes"] == 1e6).all()
    assert copies[copies["copy_kind"] == "DtoH"]["pinned"].all()  # the .item() reads into pinned memory


def test_other_json_is_not_taken_for_a_trace():
    assert recognise('{"resourceSpans": [{"scopeSpans": [{"spans": []}]}]}').name == "otel-traces"
    assert recognise('[{"name": "a", "value": 1}]') is None
    assert recognise('{"traceEvents_count": 3, "data": []}') is None


def _event(cat: str, name: str, ts: float, dur: float, **args: object) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur, "args": args}


@pytest.mark.parametrize(("waited_us", "charged_us"), [(11.0, 11.0), (3000.0, 3000.0), (8000.0, 4899.0)])
def test_a_sync_is_charged_the_idle_after_it_up_to_the_time_the_host_waited(tmp_path, waited_us, charged_us):
    """The GPU idles from 101 µs to 5,000 µs after a sync returns at 101 µs. Had the host not waited
    11 µs in the sync, it would have done what followed (a data loader) 11 µs sooner, no more: the
    sync costs 11 µs; one that held the host 3 ms costs 3 ms; one that held it 8 ms, the whole
    idle stretch."""
    returned = 101.0
    events = [
        _event("kernel", "gemm_a", 0.0, 101.0, correlation=1, device=0, stream=7),
        _event("cuda_runtime", "cudaStreamSynchronize", returned - waited_us, waited_us, correlation=2),
        _event("kernel", "gemm_b", 5000.0, 100.0, correlation=3, device=0, stream=7),
    ]
    facts = compute_facts(load_dump(str(_write(tmp_path / "t.json", {"traceEvents": events}, gzipped=False))))
    assert facts.number("trace.sync_idle_share") == pytest.approx(charged_us / 5100.0)
    assert facts.number("trace.gpu_busy_share") == pytest.approx(201.0 / 5100.0)


def test_an_idle_stretch_is_queued_by_when_the_kernel_ending_it_was_issued(tmp_path):
    """Three idle stretches of 1 ms: the first ended by a kernel whose launch returned before the GPU
    went idle (queued), the second by one launched during the stretch (the host's: it was launching),
    the third by one whose launch the trace does not have (the host's, by what it was doing)."""
    events = [
        _event("cuda_runtime", "cudaLaunchKernel", 0.0, 5.0, correlation=1),
        _event("kernel", "gemm", 10.0, 100.0, device=0, stream=7, correlation=1),
        _event("cuda_runtime", "cudaLaunchKernel", 20.0, 5.0, correlation=2),  # returned at 25 < 110
        _event("kernel", "gemm", 1110.0, 100.0, device=0, stream=7, correlation=2),
        _event("cuda_runtime", "cudaLaunchKernel", 2200.0, 5.0, correlation=3),  # during the idle stretch
        _event("kernel", "gemm", 2210.0, 100.0, device=0, stream=7, correlation=3),
        _event("kernel", "gemm", 3310.0, 100.0, device=0, stream=7, correlation=99),  # no launch traced
    ]
    facts = compute_facts(load_dump(str(_write(tmp_path / "t.json", {"traceEvents": events}, gzipped=False))))
    idle = 3000.0
    assert facts.number("trace.idle_queued_share") == pytest.approx(1000.0 / idle)
    assert facts.number("trace.idle_launch_share") == pytest.approx(5.0 / idle)
    assert facts.number("trace.idle_untraced_share") == pytest.approx(1995.0 / idle)
    assert facts.number("trace.queued_idle_share") == pytest.approx(1000.0 / 3400.0)
    assert facts.number("trace.queue_wait_median_us") == pytest.approx(5.0)  # 5, 1085 and 5 µs


def test_a_correlation_id_that_repeats_ties_each_kernel_to_the_launch_just_before_it(tmp_path):
    """Two profiles of the same eager steps in one file, their ids alike (merged from two processes):
    each kernel is tied to the launch just before it, not to the first with its id, which would
    make every kernel of the second look issued long before it ran."""
    document = simulate_trace(TracedModel(steps=2, small_ops=300, gemm_ops=10, gemm_kernel_us=200), seed=4)
    once = compute_facts(load_dump(str(_write(tmp_path / "once.json.gz", document))))
    events = document["traceEvents"]
    later = max(e["ts"] + e["dur"] for e in events) - min(e["ts"] for e in events) + 100.0
    document["traceEvents"] = events + [{**e, "ts": e["ts"] + later} for e in events]
    twice = compute_facts(load_dump(str(_write(tmp_path / "twice.json.gz", document))))
    assert once.number("trace.queue_wait_median_us") < 1_000
    for fact in ("trace.idle_queued_share", "trace.queue_wait_median_us", "trace.launch_bound_idle_share"):
        assert twice.number(fact) == pytest.approx(once.number(fact), rel=0.05, abs=0.01)


def test_compare_of_two_traces_judges_the_step_on_the_gpu(tmp_path, run_cli):
    """The same eager model, then with its small kernels captured in a CUDA graph: the GPU's step time
    falls; the host's annotation (which ends when the host has issued the step) is shown, not judged."""
    from fixtures.kernel_trace import write_trace

    eager = TracedModel(small_ops=600, gemm_ops=10, gemm_kernel_us=200)
    before = write_trace(eager, tmp_path / "eager.json.gz", seed=1)
    after = write_trace(TracedModel(small_ops=600, gemm_ops=10, gemm_kernel_us=200, graphed=True),
                        tmp_path / "graphed.json.gz", seed=1)  # fmt: skip
    code, out, _ = run_cli("compare", before, after, "--format", "json")
    comparison = json.loads(out)
    figures = {f["name"]: f for f in comparison["figures"]}
    assert comparison["verdict"] == "improved"
    assert figures["step_time"]["verdict"] == "better" and figures["step_time"]["change"] < -0.3
    assert figures["host_step_time"]["verdict"] == "informational"
    assert figures["launch_bound_idle"]["verdict"] == "better"


@needs_traces
def test_the_shared_before_after_pair_ran_on_two_gpus_and_is_not_comparable(run_cli):
    code, out, _ = run_cli(
        "compare", _trace_named("trace_diff__control"), _trace_named("trace_diff__test"), "--format", "json"
    )
    comparison = json.loads(out)
    assert comparison["verdict"] == "not comparable"
    assert any("A100" in d["before"] and "V100" in d["after"] for d in comparison["differences"])


def test_a_trace_beside_the_request_log_says_why_the_forward_is_long(report_of):
    """The request log says the forward is 90 % of latency; the trace of that forward says its kernels
    are tiny and the GPU waits on their launches: the finding is the unfused operators, and the long
    forward is shown as their consequence, not as a second cause."""
    from tests.conftest import DUMPS

    report = report_of(DUMPS / "unfused-forward-traced")
    first = report["hypotheses"][0]
    assert first["id"] == "unfused-operators" and first["score"] >= 0.5
    forward = next(h for h in report["hypotheses"] if h["id"] == "compute-bound-forward")
    assert forward["explained_by"] == "unfused-operators" and forward["score"] < 0.5
    alone = report_of(DUMPS / "compute-bound-forward")["hypotheses"][0]
    assert alone["id"] == "compute-bound-forward" and alone["score"] >= 0.5  # without the trace: the forward


def test_several_gpus_the_busiest_is_analysed_and_named(tmp_path):
    """A two-GPU trace: the facts are the GPU with the most kernel time, and say which it is; kernels
    overlapping on two streams of one GPU count once towards its busy time."""
    events = [
        _event("kernel", "gemm", 0.0, 100.0, device=0, stream=7, correlation=1),
        _event("kernel", "gemm", 50.0, 100.0, device=0, stream=9, correlation=2),  # overlaps the first
        _event("kernel", "gemm", 300.0, 100.0, device=0, stream=7, correlation=3),
        _event("kernel", "small", 0.0, 10.0, device=1, stream=7, correlation=4),
    ]
    events[1]["tid"], events[3]["pid"] = 9, 1
    facts = compute_facts(load_dump(str(_write(tmp_path / "t.json", {"traceEvents": events}, gzipped=False))))
    assert facts.number("trace.kernels") == 3
    assert facts.number("trace.gpu_busy_share") == pytest.approx(250.0 / 400.0)
    assert "GPU 0" in facts.values["trace.kernels"].source


def test_a_rocm_trace_reads_as_a_cuda_one(tmp_path):
    """ROCm's PyTorch profiler writes the same categories with HIP's names: hipLaunchKernel launches,
    hipDeviceSynchronize synchronises."""
    events = []
    for i in range(200):
        start = i * 20.0
        events.append(_event("cuda_runtime", "hipLaunchKernel", start, 6.0, correlation=i))
        events.append(
            _event("kernel", "elementwise_kernel", start + 8.0, 3.0, device=0, stream=0, correlation=i)
        )
    events.append(_event("cuda_runtime", "hipDeviceSynchronize", 4000.0, 5.0, correlation=999))
    facts = compute_facts(
        load_dump(str(_write(tmp_path / "rocm.json", {"traceEvents": events}, gzipped=False)))
    )
    assert facts.number("trace.launches") == 200
    assert facts.number("trace.sync_calls") == 1
    assert facts.number("trace.launch_median_us") == 6.0


def test_the_trace_picture_shows_what_the_facts_measured():
    """The strip's busy share over the span is the facts' (read at evenly spaced instants, so to a
    percent), its idle states add up with it to the whole, and a line marks each step."""
    from diagnose.pictures.trace import trace_strip
    from tests.conftest import DUMPS

    dump = load_dump(str(DUMPS / "host-sync-in-step"))
    facts = compute_facts(dump)
    strip = trace_strip(dump)
    assert strip is not None
    assert float(strip.shares["busy"].mean()) == pytest.approx(facts.number("trace.gpu_busy_share"), abs=0.01)
    assert sum(strip.shares.values()) == pytest.approx(1.0)
    assert len(strip.step_starts_ms) == facts.number("trace.steps")


def test_two_traces_in_one_folder_are_not_merged_into_one_timeline(tmp_path):
    """Each trace is on its own clock: one is analysed (the most kernel time), and the report says
    which, and that the other is not."""
    from fixtures.kernel_trace import write_trace as write_trace_

    write_trace_(
        TracedModel(small_ops=600, gemm_ops=10, gemm_kernel_us=200), tmp_path / "eager.json.gz", seed=1
    )
    write_trace_(TracedModel(steps=2), tmp_path / "short.json.gz", seed=1)
    dump = load_dump(str(tmp_path))
    assert dump.files["gpu_activity"] == ["eager.json.gz"]
    assert {i["file"] for i in dump.importers} == {"eager.json.gz", "short.json.gz"}
    assert any("analysed eager.json.gz (the most kernel time), not short.json.gz" in w for w in dump.warnings)
    alone = compute_facts(load_dump(str(tmp_path / "eager.json.gz")))
    assert compute_facts(dump).number("trace.gpu_busy_share") == alone.number("trace.gpu_busy_share")


def test_the_report_says_what_the_trace_shows_whatever_the_rules_made_of_it(tmp_path, run_cli):
    """A trace's headline under the summary: kernels, the GPU's busy share, where its idle time went,
    each figure the facts' (here a trace no rule fires on: the host runs ahead, and the GPU's few
    idle microseconds are it turning from one queued kernel to the next)."""
    from fixtures.kernel_trace import write_trace

    path = write_trace(
        TracedModel(small_ops=20, gemm_ops=60, gemm_kernel_us=400), tmp_path / "t.json.gz", seed=1
    )
    facts = compute_facts(load_dump(str(path)))
    code, out, _ = run_cli("file", path)
    busy = f"GPU busy {facts.number('trace.gpu_busy_share') * 100:.0f}%"
    assert code == 0 and f"profiler trace: {facts.number('trace.kernels'):,.0f} kernels on GPU 0" in out
    turning = f"turning between queued kernels {facts.number('trace.idle_turnaround_share') * 100:.0f}%"
    assert busy in out and f"while it idled: {turning}" in out and "; the host launching" in out
    assert "No rule found evidence" in out


def test_trace_tables_written_by_hand_are_a_trace_of_their_own_beside_an_imported_one(tmp_path):
    """gpu_activity.csv written by hand and a profiler's file in one folder are two traces: the one
    with the most kernel time is analysed and the other named, not silently replaced."""
    from fixtures.kernel_trace import write_trace

    write_trace(
        TracedModel(small_ops=600, gemm_ops=10, gemm_kernel_us=200), tmp_path / "eager.json.gz", seed=1
    )
    (tmp_path / "gpu_activity.csv").write_text("ts,dur_us,kind,name,gpu\n0,5,kernel,k,0\n10,5,kernel,k,0\n")
    dump = load_dump(str(tmp_path))
    assert dump.files["gpu_activity"] == ["eager.json.gz"]
    assert any(
        "analysed eager.json.gz (the most kernel time), not gpu_activity.csv" in w for w in dump.warnings
    )
    alone = load_dump(str(tmp_path / "gpu_activity.csv"))
    assert alone.files["gpu_activity"] == ["gpu_activity.csv"] and len(alone.traces["gpu_activity"]) == 2
