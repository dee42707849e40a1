"""The performance archive: what it keeps, comparing against it, and surviving concurrency, kills and damage."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sqlite3
import subprocess
import sys

import pytest

from diagnose.archive import Archive, ArchiveError
from diagnose.archive.store import SCHEMA_VERSION
from tests.conftest import DUMPS, ROOT

PAIR = ROOT / "fixtures" / "pairs" / "improved-p99"


@pytest.fixture
def archive_file(tmp_path, monkeypatch):
    path = tmp_path / "perf.sqlite"
    monkeypatch.setenv("DIAGNOSE_ARCHIVE", str(path))
    return path


def test_a_recording_is_kept_with_its_figures_words_and_comparison(run_cli, archive_file):
    code, _, err = run_cli("archive", "add", PAIR / "before", "--label", "v1.3")
    assert code == 0 and f"as #1 in {archive_file}" in err
    code, _, err = run_cli(
        "archive",
        "add",
        PAIR / "after",
        "--label",
        "v1.4-graphs",
        "--change",
        "CUDA graphs",
        "--expect",
        "p99 -20%",
        "--baseline",
        "1",
    )
    assert code == 0, err
    assert "against #1: improved: " in err and "expected p99 -20%; measured p50 -" in err
    code, out, _ = run_cli("archive", "list")
    assert code == 0 and "v1.3" in out and "v1.4-graphs" in out and "CUDA graphs" in out
    code, out, _ = run_cli("archive", "show", "2")
    assert "against baseline #1: improved:" in out and "expected: p99 -20%; measured: p50" in out
    code, out, _ = run_cli("archive", "trend", "--metric", "p99")
    assert code == 0 and "#2" in out and "-26.0%" in out


def test_comparing_against_an_archived_baseline_agrees_with_comparing_the_dumps(run_cli, archive_file):
    run_cli("archive", "add", PAIR / "before")
    code, out, err = run_cli("compare", "--baseline", "1", PAIR / "after", "--format", "json")
    assert code == 0, err
    archived_text, archived = out, json.loads(out)
    _, out, _ = run_cli("compare", PAIR / "before", PAIR / "after", "--format", "json")
    direct = json.loads(out)
    assert archived["verdict"] == direct["verdict"] == "improved"
    assert archived["before"]["dump"] == f"archive #1 ({PAIR / 'before'})"
    for a, d in zip(archived["figures"], direct["figures"], strict=True):
        assert a["name"] == d["name"] and a["before"] == d["before"] and a["after"] == d["after"]
    # The archived side's replicates are its own draw (seeded by its content): close, not equal.
    for name in ("p50", "p99", "mean", "throughput"):
        a, d = (next(f for f in report["figures"] if f["name"] == name) for report in (archived, direct))
        assert abs(a["low"] - d["low"]) < 0.05 and abs(a["high"] - d["high"]) < 0.05, name
    assert run_cli("compare", "--baseline", "1", PAIR / "after", "--format", "json")[1] == archived_text


def test_two_writers_at_once_both_land(archive_file):
    command = [sys.executable, "-m", "diagnose", "archive", "add", str(PAIR / "before")]
    env = {**os.environ, "DIAGNOSE_ARCHIVE": str(archive_file), "PYTHONPATH": str(ROOT)}
    runs = [
        subprocess.Popen([*command, "--label", f"writer-{i}"], env=env, stderr=subprocess.PIPE, text=True)
        for i in range(2)
    ]
    for run in runs:
        assert run.wait(timeout=300) == 0, run.stderr.read()
    with Archive(archive_file) as archive:
        assert sorted(e.label for e in archive.entries()) == ["writer-0", "writer-1"]
        assert len({e.id for e in archive.entries()}) == 2


def test_a_writer_killed_mid_write_leaves_the_archive_as_it_was(run_cli, archive_file):
    run_cli("archive", "add", PAIR / "before", "--label", "kept")
    script = (
        "import sqlite3, sys, time\n"
        f"db = sqlite3.connect({str(archive_file)!r}, isolation_level=None)\n"
        "db.execute('BEGIN IMMEDIATE')\n"
        'db.execute("INSERT INTO entries (added_at, dump, requests, cold_excluded, environment, background, '
        "hypotheses, warnings) VALUES ('x', 'half', 0, 0, '{}', '{}', '[]', '[]')\")\n"
        "print('inside', flush=True)\n"
        "time.sleep(60)\n"
    )
    writer = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert writer.stdout.readline().strip() == "inside"
    writer.send_signal(signal.SIGKILL)
    writer.wait(timeout=10)
    with Archive(archive_file) as archive:
        assert [e.label for e in archive.entries()] == ["kept"]
    code, _, err = run_cli("archive", "add", PAIR / "after", "--label", "after-the-kill")
    assert code == 0, err


def test_an_archive_from_a_newer_diagnose_is_refused_and_left_alone(run_cli, archive_file):
    run_cli("archive", "add", PAIR / "before")
    db = sqlite3.connect(archive_file)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    before = archive_file.read_bytes()
    code, _, err = run_cli("archive", "list")
    assert code == 2
    assert f"written by a newer diagnose (archive schema {SCHEMA_VERSION + 1})" in err and "upgrade" in err
    assert archive_file.read_bytes() == before


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"this is a text file, not a database\n" * 100, "not a diagnose archive, or a damaged one"),
        (None, "an SQLite file, but not a diagnose archive"),
    ],
)
def test_a_file_that_is_not_an_archive_is_an_error_and_is_never_overwritten(
    run_cli, archive_file, content, message
):
    if content is None:
        db = sqlite3.connect(archive_file)
        db.execute("CREATE TABLE notes (text TEXT)")
        db.commit()
        db.close()
    else:
        archive_file.write_bytes(content)
    before = archive_file.read_bytes()
    code, _, err = run_cli("archive", "add", PAIR / "before")
    assert code == 2 and message in err and "bug" not in err
    assert archive_file.read_bytes() == before


def test_asking_an_archive_for_what_it_does_not_hold_says_what_it_does(run_cli, archive_file):
    code, _, err = run_cli("archive", "list")
    assert code == 2 and "no archive there yet" in err
    run_cli("archive", "add", PAIR / "before")
    code, _, err = run_cli("archive", "show", "7")
    assert code == 2 and "no recording #7; the archive holds #1" in err
    code, _, err = run_cli("compare", "--baseline", "7", PAIR / "after")
    assert code == 2 and "no recording #7" in err
    code, _, err = run_cli("compare", "--baseline", "1", PAIR / "before", PAIR / "after")
    assert code == 2 and "--baseline ID AFTER" in err


def test_the_archive_keeps_no_raw_table(run_cli, archive_file):
    run_cli("archive", "add", PAIR / "before")
    db = sqlite3.connect(archive_file)
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    # capacity_runs: diagnose load's results (figures and windows of the soak, no request), kept whole
    assert tables == {"entries", "measures", "samples", "comparisons", "capacity_runs", "sqlite_sequence"}
    sample = db.execute("SELECT length(sample) FROM samples").fetchall()
    assert all(size <= 50_000 * 4 for (size,) in sample)
    db.close()


def test_an_empty_archive_file_is_made_an_archive(archive_file):
    archive_file.touch()
    with Archive(archive_file) as archive:
        assert archive.entries() == []
    db = sqlite3.connect(archive_file)
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    db.close()


def test_a_folder_given_as_the_archive_is_refused():
    with pytest.raises(ArchiveError, match="not a file"):
        Archive(ROOT / "fixtures")


def test_the_trend_can_be_drawn_from_the_archived_figures(run_cli, archive_file, tmp_path):
    from diagnose.pictures.trend import trend_data

    run_cli("archive", "add", PAIR / "before", "--label", "v1.3")
    run_cli("archive", "add", PAIR / "after", "--label", "v1.4")
    chart = tmp_path / "trend.png"
    code, out, err = run_cli("archive", "trend", "--metric", "p99", "--chart", chart)
    assert code == 0 and "trend chart written" in err
    assert chart.read_bytes().startswith(b"\x89PNG")
    with Archive(archive_file) as archive:
        data = trend_data(archive.entries(), "p99")
        assert data.labels == ("#1 v1.3", "#2 v1.4")
        assert data.values == tuple(e.figures["p99"] for e in archive.entries())


def test_the_same_recording_archived_twice_is_said(run_cli, archive_file):
    code, _, err = run_cli("archive", "add", PAIR / "before", "--label", "v1.3")
    assert code == 0 and "already held" not in err
    code, _, err = run_cli("archive", "add", PAIR / "after", "--label", "v1.4")
    assert code == 0 and "already held" not in err
    code, _, err = run_cli("archive", "add", PAIR / "before", "--label", "v1.3 again")
    assert code == 0 and "already held this recording (the same window and requests) as #1" in err


def test_two_profiler_traces_are_not_taken_for_one_recording(run_cli, archive_file):
    """A trace has no window on the wall clock and no requests: two different traces share both."""
    for name in ("unfused-operators", "near-miss-cuda-graphs"):
        code, _, err = run_cli("archive", "add", DUMPS / name)
        assert code == 0 and "already held" not in err


def test_the_same_pair_gives_the_same_intervals_however_it_is_compared(run_cli, archive_file):
    """compare BEFORE AFTER, compare --baseline ID AFTER and archive add AFTER --baseline ID: each side's
    bootstrap is seeded by its own content, not by the side it is on."""
    assert run_cli("archive", "add", PAIR / "before")[0] == 0
    code, direct, _ = run_cli("compare", PAIR / "before", PAIR / "after", "--format", "json")
    code_b, archived, _ = run_cli("compare", "--baseline", "1", PAIR / "after", "--format", "json")
    assert code == code_b == 0
    figures = [
        {f["name"]: (f["low"], f["high"]) for f in json.loads(out)["figures"]} for out in (direct, archived)
    ]
    assert figures[0] == figures[1] and figures[0]["p99"][0] is not None
    code, _, err = run_cli("archive", "add", PAIR / "after", "--baseline", "1")
    assert code == 0 and json.loads(direct)["headline"] in err


def _open_at_the_barrier(path, barrier) -> None:
    barrier.wait(timeout=60)
    Archive(path)


def test_six_processes_opening_one_new_archive_at_once_all_open_it(tmp_path):
    """SQLite can answer "database is locked" at once while another process creates the archive.

    Six processes forked from this one (diagnose already imported) open the archive at one barrier."""
    forked = multiprocessing.get_context("fork")
    for attempt in range(30):
        path = tmp_path / f"perf-{attempt}.sqlite"
        barrier = forked.Barrier(6)
        runs = [forked.Process(target=_open_at_the_barrier, args=(path, barrier)) for _ in range(6)]
        for run in runs:
            run.start()
        for run in runs:
            run.join(timeout=120)
            assert run.exitcode == 0
