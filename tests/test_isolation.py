"""Odd evidence never takes the analysis down: each piece that fails is left out and named."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from tests.conftest import DUMPS


def _requests(folder, latency, **extra) -> None:
    ts = 1.7e9 + np.arange(len(latency), dtype="float64")
    pd.DataFrame({"ts": ts, "latency_ms": latency, **extra}).to_csv(folder / "requests.csv", index=False)


def test_infinite_and_missing_latencies_leave_a_valid_json_report(run_cli, tmp_path):
    latency = np.full(300, 12.0)
    latency[[3, 4, 5]] = [np.inf, -np.inf, np.nan]
    _requests(tmp_path, latency)
    code, out, err = run_cli("file", tmp_path, "--format", "json")
    assert code == 0, err
    report = json.loads(out)  # strict JSON: no Infinity or NaN tokens
    assert report["summary"]["latency_ms"]["p99"] == 12.0
    assert "Infinity" not in out and "NaN" not in out


def test_a_five_megabyte_field_in_a_csv_is_data_not_a_crash(run_cli, tmp_path):
    lines = ["ts,latency_ms,prompt"] + [f"{1.7e9 + i},10,short" for i in range(100)]
    lines.append(f"{1.7e9 + 100},11,{'x' * 5_000_000}")
    (tmp_path / "requests.csv").write_text("\n".join(lines) + "\n")
    code, out, err = run_cli("file", tmp_path, "--format", "json")
    assert code == 0, err
    assert json.loads(out)["summary"]["requests"] == 101


def test_an_importer_that_fails_leaves_the_other_files_read(run_cli, tmp_path, monkeypatch):
    from diagnose.importers.xid import XidImporter

    def broken(self, path, tz=None):
        raise TypeError("unexpected None")

    monkeypatch.setattr(XidImporter, "read", broken)
    (tmp_path / "dmesg.txt").write_text(
        "[Mon Nov 30 02:00:00 2026] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n"
    )
    _requests(tmp_path, np.full(50, 10.0))
    code, out, err = run_cli("file", tmp_path, "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    assert report["evidence"]["tables"]["requests"]["rows"] == 50
    assert any("dmesg.txt" in w and "TypeError: unexpected None" in w for w in report["evidence"]["warnings"])


def test_a_family_of_facts_that_fails_is_named_and_the_rest_still_judged(run_cli, monkeypatch):
    import diagnose.facts as facts_module

    def broken(*args, **kwargs):
        raise ValueError("odd stage column")

    monkeypatch.setattr(facts_module, "add_stage_facts", broken)
    code, out, err = run_cli("file", DUMPS / "gpu-throttling", "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    assert any(
        w.startswith("stage facts from") and "odd stage column" in w for w in report["evidence"]["warnings"]
    )
    assert report["hypotheses"][0]["id"] == "gpu-throttling"


def test_one_signal_whose_search_fails_is_left_out_alone(run_cli, monkeypatch):
    import diagnose.detect.analysis as detect_module

    real = detect_module.search_shape

    def picky(signal):
        if signal.name == "system.cpu_pct":
            raise FloatingPointError("overflow")
        return real(signal)

    monkeypatch.setattr(detect_module, "search_shape", picky)
    code, out, err = run_cli("file", DUMPS / "co-located-contention", "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    assert any("spikes of system.cpu_pct" in w for w in report["evidence"]["warnings"])
    assert report["hypotheses"][0]["id"] == "co-located-contention"
