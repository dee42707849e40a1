"""The dump reader: every table format, both timestamp styles, and damaged input."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from diagnose.dump import load_dump
from diagnose.errors import DumpError

FRAME = pd.DataFrame(
    {
        "ts": [1_764_460_802.5, 1_764_460_800.0, 1_764_460_801.0],
        "gpu": [0, 0, 0],
        "util_pct": [50.0, 30.0, 40.0],
        "vendor_extra": ["a", "b", "c"],
    }
)


def _write(frame: pd.DataFrame, path) -> None:
    name = path.name
    if name.endswith(".parquet"):
        frame.to_parquet(path, index=False)
    elif ".csv" in name:
        frame.to_csv(path, index=False, compression="gzip" if name.endswith(".gz") else None)
    else:
        frame.to_json(
            path, orient="records", lines=True, compression="gzip" if name.endswith(".gz") else None
        )


@pytest.mark.parametrize("suffix", [".csv", ".csv.gz", ".jsonl", ".jsonl.gz", ".parquet"])
def test_every_table_format_reads_the_same_sorted_table(tmp_path, suffix):
    _write(FRAME, tmp_path / f"gpu{suffix}")
    dump = load_dump(str(tmp_path))
    gpu = dump.tables["gpu"]
    assert gpu["ts"].tolist() == [1_764_460_800.0, 1_764_460_801.0, 1_764_460_802.5]
    assert gpu["util_pct"].tolist() == [30.0, 40.0, 50.0]
    assert "vendor_extra" in gpu.columns  # unknown columns are kept
    assert dump.files["gpu"] == [f"gpu{suffix}"]
    assert dump.warnings == []


def test_iso_timestamps_with_offsets_become_utc_epoch_seconds(tmp_path):
    (tmp_path / "system.csv").write_text(
        "ts,cpu_pct\n2026-11-30T13:14:15.250+08:00,10\n2026-11-30T05:14:16Z,20\n", encoding="utf-8"
    )
    system = load_dump(str(tmp_path)).tables["system"]
    expected = pd.Timestamp("2026-11-30T05:14:15.250Z").timestamp()
    assert system["ts"].tolist() == pytest.approx([expected, expected + 0.75])


def test_naive_timestamps_are_read_as_utc_with_one_warning(tmp_path):
    (tmp_path / "system.csv").write_text(
        "ts,cpu_pct\n2026-11-30T05:14:15,10\n2026-11-30T05:14:16,20\n", encoding="utf-8"
    )
    dump = load_dump(str(tmp_path))
    assert dump.tables["system"]["ts"].iloc[0] == pd.Timestamp("2026-11-30T05:14:15Z").timestamp()
    assert [w for w in dump.warnings if "without a UTC offset" in w] == [
        "system.csv: timestamps without a UTC offset read as UTC"
    ]


def test_epoch_milliseconds_are_recognised_and_warned_about(tmp_path):
    (tmp_path / "system.csv").write_text("ts,cpu_pct\n1764460800000,10\n1764460801000,20\n", encoding="utf-8")
    dump = load_dump(str(tmp_path))
    assert dump.tables["system"]["ts"].tolist() == [1_764_460_800.0, 1_764_460_801.0]
    assert any("milliseconds" in w for w in dump.warnings)


def test_duplicate_ts_key_rows_keep_the_last_and_are_counted(tmp_path):
    (tmp_path / "gpu.csv").write_text("ts,gpu,util_pct\n1,0,10\n1,1,70\n1,0,15\n2,0,20\n", encoding="utf-8")
    dump = load_dump(str(tmp_path))
    gpu = dump.tables["gpu"]
    assert gpu.loc[gpu["gpu"] == 0, "util_pct"].tolist() == [15.0, 20.0]
    assert len(gpu) == 3
    assert any("1 row with a duplicate (ts, gpu); kept the last" in w for w in dump.warnings)


def test_requests_without_ids_keep_simultaneous_arrivals(tmp_path):
    (tmp_path / "requests.csv").write_text("ts,latency_ms\n1,10\n1,10\n2,12\n", encoding="utf-8")
    assert len(load_dump(str(tmp_path)).tables["requests"]) == 3


def test_latency_is_summed_from_stages_when_absent(tmp_path):
    (tmp_path / "requests.csv").write_text(
        "ts,stage_queue_ms,stage_forward_ms\n1,2,10\n2,3,11\n", encoding="utf-8"
    )
    dump = load_dump(str(tmp_path))
    assert dump.tables["requests"]["latency_ms"].tolist() == [12.0, 14.0]
    assert any("sum of 2 stages" in w for w in dump.warnings)


def test_unknown_files_and_folders_are_listed_as_not_used(tmp_path):
    _write(FRAME, tmp_path / "gpu.csv")
    (tmp_path / "notes.txt").write_text("on-call notes", encoding="utf-8")
    (tmp_path / "screenshots").mkdir()
    dump = load_dump(str(tmp_path))
    assert dump.not_used == ["notes.txt", "screenshots/"]


def test_the_same_table_in_two_formats_names_both_files_and_skips_it(tmp_path):
    _write(FRAME, tmp_path / "gpu.csv")
    _write(FRAME, tmp_path / "gpu.parquet")
    _write(FRAME.drop(columns=["gpu"]), tmp_path / "system.csv")
    dump = load_dump(str(tmp_path))
    assert "gpu" not in dump.tables
    assert any("gpu.csv and gpu.parquet" in w for w in dump.warnings)


def test_manifest_fields_are_read_including_unquoted_yaml_times(tmp_path):
    _write(FRAME, tmp_path / "gpu.csv")
    (tmp_path / "manifest.yaml").write_text(
        "format: diagnose-dump/1\nhost: gpu-node-7\ninterval_s: 1.0\n"
        "process_start: [2026-11-30T02:00:03Z, 1764460800]\nslo_p99_ms: 250\n",
        encoding="utf-8",
    )
    manifest = load_dump(str(tmp_path)).manifest
    assert manifest.host == "gpu-node-7"
    assert manifest.slo_p99_ms == 250
    assert manifest.process_starts == [1_764_460_800.0, pd.Timestamp("2026-11-30T02:00:03Z").timestamp()]


def test_invalid_manifest_is_a_warning_with_its_line(tmp_path):
    _write(FRAME, tmp_path / "gpu.csv")
    (tmp_path / "manifest.yaml").write_text("host: a\ninterval_s: [1,\n", encoding="utf-8")
    dump = load_dump(str(tmp_path))
    assert any(w.startswith("manifest.yaml line") and "manifest ignored" in w for w in dump.warnings)


# --- damaged input: a warning when the rest is usable --------------------------------------


def test_non_numeric_value_becomes_missing_with_file_line_and_column(tmp_path):
    (tmp_path / "requests.csv").write_text("ts,latency_ms\n1,10\n2,fast\n3,12\n4,n/a\n", encoding="utf-8")
    dump = load_dump(str(tmp_path))
    latency = dump.tables["requests"]["latency_ms"]
    assert latency.isna().sum() == 2 and latency.dropna().tolist() == [10.0, 12.0]
    assert (
        "requests.csv line 3, column latency_ms: expected a number, got 'fast'; 2 such values read as missing"
        in dump.warnings
    )


def test_truncated_last_csv_line_is_skipped_with_its_line_number(tmp_path):
    (tmp_path / "gpu.csv").write_text("ts,gpu,util_pct\n1,0,10\n2,0,20\n3,0", encoding="utf-8")
    dump = load_dump(str(tmp_path))
    assert dump.tables["gpu"]["util_pct"].tolist() == [10.0, 20.0]
    assert any("gpu.csv: skipped 1 malformed line: line 4 (2 fields, expected 3)" in w for w in dump.warnings)


def test_truncated_gzip_keeps_the_complete_lines(tmp_path):
    lines = "ts,cpu_pct\n" + "".join(f"{i},{i % 100}\n" for i in range(20_000))
    data = gzip.compress(lines.encode())
    (tmp_path / "system.csv.gz").write_bytes(data[: len(data) // 2])
    dump = load_dump(str(tmp_path))
    rows = len(dump.tables["system"])
    assert 1_000 < rows < 20_000
    assert np.all(np.diff(dump.tables["system"]["ts"]) == 1)
    assert any("truncated" in w for w in dump.warnings)


def test_bad_jsonl_lines_are_skipped_and_reported(tmp_path):
    good = [json.dumps({"ts": i, "latency_ms": 10 + i}) for i in range(5)]
    text = "\n".join([good[0], "{not json", good[1], "[1, 2]", *good[2:]]) + '\n{"ts": 9, "laten'
    (tmp_path / "requests.jsonl").write_text(text, encoding="utf-8")
    dump = load_dump(str(tmp_path))
    assert len(dump.tables["requests"]) == 5
    (warning,) = dump.warnings
    assert warning.startswith("requests.jsonl: skipped 3 unreadable lines: lines 2 (column 2: ")
    assert ", 4 (a JSON list, expected an object), 8 (column 11: " in warning


def test_unreadable_file_is_skipped_while_the_rest_is_analysed(tmp_path):
    _write(FRAME, tmp_path / "gpu.csv")
    (tmp_path / "system.csv").write_text("", encoding="utf-8")
    (tmp_path / "processes.parquet").write_bytes(b"PAR1 definitely not parquet")
    (tmp_path / "allocator.csv").write_bytes(b"\x00\x01\x02binary\xff")
    (tmp_path / "server.csv").write_text("when,queue_depth\n1,2\n", encoding="utf-8")
    dump = load_dump(str(tmp_path))
    assert set(dump.tables) == {"gpu"}
    text = "\n".join(dump.warnings)
    assert "system.csv: the file is empty; table skipped" in text
    assert "processes.parquet: not a readable Parquet file" in text
    assert "allocator.csv: binary data where text was expected" in text
    assert "server.csv: no 'ts' column (columns found: when, queue_depth); table skipped" in text


# --- unusable input: an error, exit 2, one line, no traceback ---------------------------


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda p: None, "not a diagnose dump: no tables found"),
        (lambda p: (p / "notes.txt").write_text("x"), "not a diagnose dump"),
        (lambda p: (p / "requests.csv").write_text(""), "requests.csv: the file is empty"),
        (lambda p: (p / "requests.csv").write_text("latency_ms\n12\n"), "requests.csv: no 'ts' column"),
        (
            lambda p: (p / "requests.csv").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00"),
            "requests.csv: binary data",
        ),
        (
            lambda p: (p / "requests.csv").write_text("ts,latency_ms\nyesterday,1\n"),
            "requests.csv: line 2, column ts",
        ),
    ],
)
def test_unusable_dump_raises_a_one_line_error_naming_the_file(tmp_path, setup, message):
    setup(tmp_path)
    with pytest.raises(DumpError) as error:
        load_dump(str(tmp_path))
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_cli_reports_bad_input_with_exit_2_and_no_traceback(tmp_path):
    (tmp_path / "requests.csv").write_bytes(b"\x00\x00\x00")
    for target in (tmp_path, tmp_path / "requests.csv", tmp_path / "missing"):
        result = subprocess.run(
            [sys.executable, "-m", "diagnose", "file", str(target)], capture_output=True, text=True
        )
        assert result.returncode == 2
        assert result.stdout == ""
        assert len(result.stderr.strip().splitlines()) == 1
        assert result.stderr.startswith("diagnose: error: ") and "Traceback" not in result.stderr


def test_reading_never_modifies_the_users_files(tmp_path):
    (tmp_path / "requests.csv").write_text("ts,latency_ms\n2,fast\n1,10\n1,10\n", encoding="utf-8")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    load_dump(str(tmp_path))
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


@pytest.mark.parametrize("code_limit", [2**62, 64])  # 64: the codes would overflow, pandas' own way is used
def test_duplicates_are_pandas_duplicated_on_ts_and_key(monkeypatch, code_limit):
    """The integer-coded check finds exactly the rows pandas' DataFrame.duplicated(keep="last") finds."""
    from diagnose.dump import cleaning
    from diagnose.dump.cleaning import _duplicated_last

    monkeypatch.setattr(cleaning, "_CODE_LIMIT", code_limit)
    rng = np.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(1, 120))
        ts = np.sort(rng.integers(0, 15, n).astype("float64"))
        gpu = pd.Series(rng.choice([0.0, 1.0, np.nan], n))
        name = pd.Series(rng.choice(["a", "b", None], n), dtype="object")
        for keys in ([gpu], [gpu, name], [name], []):
            columns = {"ts": ts, **{f"k{i}": key.to_numpy() for i, key in enumerate(keys)}}
            expected = pd.DataFrame(columns).duplicated(keep="last").to_numpy()
            assert (_duplicated_last(ts, keys) == expected).all()


def test_duplicates_in_a_table_that_lists_each_instants_keys_in_order():
    """A GPU table repeats GPUs 0..n every instant: the ascending codes' shortcut, and what breaks it."""
    from diagnose.dump.cleaning import _duplicated_last

    rng = np.random.default_rng(1)
    for _ in range(200):
        instants, gpus = int(rng.integers(1, 30)), int(rng.integers(1, 9))
        ts = np.repeat(np.arange(instants, dtype="float64"), gpus)
        gpu = np.tile(np.arange(gpus, dtype="float64"), instants)
        keep = rng.random(ts.size) > 0.1  # an instant may miss a GPU
        ts, gpu = ts[keep], gpu[keep]
        if ts.size and rng.random() < 0.5:  # a row written twice, or a GPU listed out of order
            at = int(rng.integers(0, ts.size))
            ts, gpu = np.insert(ts, at, ts[at]), np.insert(gpu, at, rng.choice([gpu[at], 0.0]))
        expected = pd.DataFrame({"ts": ts, "gpu": gpu}).duplicated(keep="last").to_numpy()
        assert (_duplicated_last(ts, [pd.Series(gpu)]) == expected).all()


@pytest.mark.parametrize("absurd", ["inf", "1e308", "-inf"])
def test_a_latency_that_is_no_measurement_is_read_as_missing_and_said(tmp_path, run_cli, absurd):
    """One such value made every mean infinite, and the JSON report end in an internal error."""
    rows = "\n".join(f"{1764460800 + i * 0.1},{absurd if i % 3 == 0 else 15}" for i in range(200))
    (tmp_path / "requests.csv").write_text("ts,latency_ms\n" + rows + "\n")
    code, out, err = run_cli("file", tmp_path, "--format", "json")
    assert code == 0, err
    assert "column latency_ms" in err and "67 such values read as missing" in err
    assert json.loads(out)["summary"]["latency_ms"]["p99"] == 15


def test_a_stage_column_without_a_name_is_said_and_not_used(tmp_path):
    (tmp_path / "requests.csv").write_text("ts,stage__ms,stage_queue_ms\n1780000000,5,10\n1780000001,6,11\n")
    dump = load_dump(str(tmp_path))
    assert "stage__ms" not in dump.tables["requests"].columns
    assert list(dump.tables["requests"]["latency_ms"]) == [10, 11]
    assert any(
        "column stage__ms names no stage (expected stage_<name>_ms); not used" in w for w in dump.warnings
    )
