"""Nsight Systems' SQLite export: a timeline like a Kineto trace's, read without touching the file."""

from __future__ import annotations

import hashlib
import sqlite3

import pytest

from diagnose.dump import load_dump
from diagnose.facts import compute_facts
from fixtures.kernel_trace import TracedModel, write_nsys_sqlite, write_trace

UNFUSED = TracedModel(small_ops=600, gemm_ops=10, gemm_kernel_us=200)
PAGEABLE = TracedModel(small_ops=20, gemm_ops=60, gemm_kernel_us=400, copy_bytes=64e6, pageable=True)
WAITING = TracedModel(small_ops=20, gemm_ops=60, gemm_kernel_us=150, event_wait_us=6_000)
# What both forms record alike: the GPU's side in full, the host's runtime calls. An nsys capture
# without NVTX ranges has no framework operators, so the idle time the operators took is untraced.
SAME = (
    "trace.kernels",
    "trace.span_ms",
    "trace.kernel_median_us",
    "trace.short_kernel_share",
    "trace.gpu_busy_share",
    "trace.launches",
    "trace.launch_median_us",
    "trace.idle_launch_share",
    "trace.idle_sync_share",
    "trace.sync_idle_share",
    "trace.pageable_copies",
    "trace.pageable_copy_share",
    "trace.idle_queued_share",
    "trace.queue_wait_median_us",
)


@pytest.mark.parametrize("model", [UNFUSED, PAGEABLE, WAITING], ids=["unfused", "pageable", "waiting"])
def test_an_export_gives_the_facts_the_same_profile_gives_as_a_kineto_trace(tmp_path, model):
    export = compute_facts(load_dump(str(write_nsys_sqlite(model, tmp_path / "report.sqlite", seed=5))))
    kineto = compute_facts(load_dump(str(write_trace(model, tmp_path / "trace.json.gz", seed=5))))
    for name in SAME:
        assert export.number(name) == pytest.approx(kineto.number(name), rel=1e-3, abs=1e-6), name
    assert export.number("trace.operator_calls") == 0


def test_the_export_is_recognised_by_its_bytes_and_left_untouched(tmp_path):
    path = write_nsys_sqlite(UNFUSED, tmp_path / "capture.bin", seed=5)
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    dump = load_dump(str(path))
    assert dump.importers[0]["importer"] == "nsys-sqlite"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["capture.bin"]  # no journal, no -wal beside it
    calls = dump.traces["host_calls"]
    assert "cudaLaunchKernel" in set(calls["name"].astype(str))  # the _v7000 suffix gone


def test_unfused_kernels_in_an_export_are_found(tmp_path, report_of):
    report = report_of(write_nsys_sqlite(UNFUSED, tmp_path / "report.sqlite", seed=5))
    assert report["hypotheses"][0]["id"] == "unfused-operators"
    assert report["hypotheses"][0]["score"] >= 0.5


def test_a_gpu_waiting_with_work_queued_in_an_export_is_found(tmp_path, report_of):
    report = report_of(write_nsys_sqlite(WAITING, tmp_path / "report.sqlite", seed=5))
    assert report["hypotheses"][0]["id"] == "gpu-waits-on-dependency"
    assert report["hypotheses"][0]["score"] >= 0.5


def test_another_sqlite_database_is_not_taken_for_an_export(tmp_path):
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE users (id INTEGER, name TEXT)")
    with pytest.raises(Exception, match="not a format diagnose recognises|no tables found"):
        load_dump(str(path))


def test_an_export_without_cuda_tracing_says_so(tmp_path):
    path = tmp_path / "report.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT)")
        db.execute(
            "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INT, end INT, globalTid INT, correlationId INT, nameId INT)"
        )
    with pytest.raises(Exception, match="no kernel, copy or runtime call"):
        load_dump(str(path))
