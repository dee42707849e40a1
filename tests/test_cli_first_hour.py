"""What a newcomer meets first: errors that are theirs exit 2 at once, reports that say what they used."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading

import pandas as pd
import pytest

from diagnose.errors import ExitCode
from tests.conftest import DUMPS

FIXTURE = DUMPS / "cpu-bound-stage"


def _header_only_dump(folder):
    folder.mkdir()
    (folder / "requests.csv").write_text("ts,latency_ms\n")
    return folder


def test_a_missing_dump_is_answered_before_the_analysis_stack_is_imported():
    """Fast start: pandas, scipy and ruptures are not loaded to say 'no such file'."""
    probe = (
        "import sys\nfrom diagnose.cli import main\ncode = main(['file', '/nope/incident'])\n"
        "print(code, sorted(m for m in ('pandas', 'scipy', 'ruptures', 'numpy') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert result.stdout.split("\n")[0] == "2 []"
    assert "/nope/incident: no such file or folder" in result.stderr


@pytest.mark.parametrize(
    "where",
    [
        lambda tmp: tmp / "a-file" / "report.txt",  # a file where a folder should be
        lambda tmp: tmp / "a-file" / "deeper" / "report.txt",
        lambda tmp: tmp / "report.pdf",  # a form diagnose does not write
    ],
    ids=["file-as-folder", "file-as-folder-above", "pdf"],
)
def test_a_report_that_cannot_be_written_is_a_user_error_named_before_analysing(run_cli, tmp_path, where):
    (tmp_path / "a-file").write_text("x")
    target = where(tmp_path)
    code, out, err = run_cli("file", FIXTURE, "-o", target)
    assert code == ExitCode.BAD_INPUT
    assert target.name in err and "bug" not in err and err.count("\n") == 1
    assert not target.exists()


def test_a_report_into_a_folder_that_does_not_exist_yet_makes_it(run_cli, tmp_path):
    """As the README's example does: `-o review/review.md`, with its pictures in review/review.assets/."""
    target = tmp_path / "review" / "review.md"
    code, _, err = run_cli("file", FIXTURE, "-o", target)
    assert code == 0, err
    assert target.read_text().startswith("# diagnose report") and (target.parent / "review.assets").is_dir()
    code, _, err = run_cli("file", FIXTURE, "-o", tmp_path / "report.pdf", "--format", "text")
    assert code == 0, err


@pytest.mark.parametrize("command", ["record", "live"])
def test_recording_into_an_impossible_folder_exits_2_with_the_path(run_cli, tmp_path, command):
    (tmp_path / "a-file").write_text("x")
    target = tmp_path / "a-file" / "dump"
    option = "-o" if command == "record" else "--record"
    code, _, err = run_cli(
        command, option, target, "--no-gpu", *(["--duration", "1s"] * (command == "record"))
    )
    assert code == ExitCode.BAD_INPUT
    assert "a-file" in err and "bug" not in err


@pytest.mark.parametrize("args", [["file", "{dump}", "--tui"], ["live", "--replay", "{dump}"]])
def test_a_dump_with_no_rows_to_view_exits_2(run_cli, tmp_path, args):
    dump = _header_only_dump(tmp_path / "empty")
    code, _, err = run_cli(*[a.format(dump=dump) for a in args])
    assert code == ExitCode.BAD_INPUT
    assert "no rows to replay" in err and "bug" not in err


def test_ctrl_c_exits_130(run_cli, monkeypatch):
    import diagnose.pipeline

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(diagnose.pipeline, "analyse_path", interrupted)
    code, _, err = run_cli("file", FIXTURE)
    assert code == ExitCode.INTERRUPTED == 130
    assert "interrupted" in err


@pytest.mark.parametrize(
    "suffix, first", [(".json", "{"), (".md", "# diagnose report"), (".txt", "diagnose: ")]
)
def test_the_report_format_follows_the_output_files_extension(run_cli, tmp_path, suffix, first):
    path = tmp_path / f"review{suffix}"
    code, _, err = run_cli("file", FIXTURE, "-o", path)
    assert code == 0, err
    assert path.read_text(encoding="utf-8").startswith(first)


def test_fail_on_names_the_hypotheses_that_tripped_it(run_cli):
    code, _, err = run_cli("file", FIXTURE, "--fail-on", "0.5", "--format", "json")
    assert code == ExitCode.FINDING_AT_THRESHOLD
    assert re.search(r"--fail-on 0\.5: cpu-bound-stage \((0\.[5-9]\d|1\.00)\)", err), err


def test_the_slo_given_is_shown_in_every_format(run_cli):
    code, text, _ = run_cli("file", FIXTURE, "--slo-p99-ms", "100")
    assert "target   P99 <= 100 ms (--slo-p99-ms): missed" in text
    _, markdown, _ = run_cli("file", FIXTURE, "--slo-p99-ms", "100", "--format", "markdown")
    assert "Target: P99 ≤ 100 ms (--slo-p99-ms): **missed**" in markdown
    _, raw, _ = run_cli("file", FIXTURE, "--slo-p99-ms", "100", "--format", "json")
    summary = json.loads(raw)["summary"]
    assert summary["slo_p99_ms"] == 100 and summary["slo_source"] == "--slo-p99-ms"


def test_text_wraps_to_the_width_it_is_given():
    from diagnose.pipeline import analyse
    from diagnose.report.text import render_text

    report = analyse(str(FIXTURE))
    narrow, wide = render_text(report, width=70), render_text(report, width=140)
    hypothesis = [line for line in narrow.splitlines() if line.startswith("     +")]
    assert hypothesis and all(len(line) <= 70 for line in hypothesis)
    assert max(len(line) for line in wide.splitlines()) > 70


def test_built_in_rules_are_cited_as_a_command_that_shows_them(run_cli):
    _, text, _ = run_cli("file", FIXTURE)
    assert "rule: diagnose rules show cpu-bound-stage" in text
    code, shown, _ = run_cli("rules", "show", "cpu-bound-stage")
    assert code == 0 and "id: cpu-bound-stage" in shown and shown.startswith("# /")
    code, _, err = run_cli("rules", "show", "no-such-rule")
    assert code == ExitCode.BAD_INPUT and "cpu-bound-stage" in err


def test_window_without_tui_analyses_the_last_window(run_cli):
    _, whole, _ = run_cli("file", FIXTURE, "--format", "json")
    _, last, _ = run_cli("file", FIXTURE, "--format", "json", "--window", "1m")
    whole, last = json.loads(whole), json.loads(last)
    assert last["window"]["end"] == whole["window"]["end"]
    start, end = (pd.Timestamp(last["window"][k]) for k in ("start", "end"))
    assert pd.Timedelta(seconds=55) <= end - start <= pd.Timedelta(seconds=60)
    assert last["summary"]["requests"] < whole["summary"]["requests"]


@pytest.mark.parametrize("option", [["--refresh", "2"], ["--export-dir", "."]])
def test_view_only_options_without_the_view_are_refused(run_cli, option):
    code, _, err = run_cli("file", FIXTURE, *option)
    assert code == ExitCode.BAD_INPUT and "--tui" in err


def _short_requests(tmp_path, **columns):
    n = 100
    frame = pd.DataFrame({"ts": 1.7e9 + 0.5 * pd.RangeIndex(n), "latency_ms": 20.0, **columns})
    frame.to_csv(tmp_path / "requests.csv", index=False)
    return tmp_path


def test_a_rule_skipped_on_a_short_dump_says_the_dump_is_too_short_not_that_a_column_is_missing(
    report_of, tmp_path
):
    report = report_of(_short_requests(tmp_path, input_len=50, stage_queue_ms=1.0))
    missing = {r["id"]: " ".join(r["missing"]) for r in report["not_run"]}
    assert "longer dump" in missing["input-length-shift"] and "spans 50 s" in missing["input-length-shift"]
    assert "input_len column" not in missing["input-length-shift"]
    assert "stage_queue_ms" not in missing["queue-saturation"]
    assert "needs 600" in missing["queue-saturation"] and "has 100" in missing["queue-saturation"]
    assert "CPU-side stage" in missing["cpu-bound-stage"] and "queue (wait)" in missing["cpu-bound-stage"]


def test_queue_saturation_without_a_utilisation_names_that_not_the_queue_column(report_of, tmp_path):
    n = 1200
    frame = pd.DataFrame(
        {
            "ts": 1.7e9 + 0.5 * pd.RangeIndex(n),
            "latency_ms": 20.0,
            "stage_queue_ms": 1.0 + (pd.RangeIndex(n) % 7),
        }
    )
    frame.to_csv(tmp_path / "requests.csv", index=False)
    report = report_of(tmp_path)
    entries = {r["id"]: " ".join(r["missing"]) for r in report["not_run"]}
    hypotheses = {h["id"]: " ".join(h["not_checked"]) for h in report["hypotheses"]}
    said = entries.get("queue-saturation") or hypotheses.get("queue-saturation", "")
    if "queue-saturation" not in entries and "queue-saturation" not in hypotheses:
        pytest.fail("queue-saturation was ruled out, so nothing says what was missing")
    assert "utilisation" in said and "queue wait itself is there" in said


def test_an_idle_one_second_recording_without_requests_is_not_called_coarse(report_of, tmp_path):
    n = 120
    pd.DataFrame({"ts": 1.7e9 + pd.RangeIndex(n), "cpu_pct": 3.0}).to_csv(
        tmp_path / "system.csv", index=False
    )
    report = report_of(tmp_path)
    assert "coarse-sampling" not in {h["id"] for h in report["hypotheses"]}


def test_a_request_status_of_http_200_is_not_an_error(report_of, tmp_path):
    n = 200
    status = ["200"] * 190 + ["503"] * 10
    pd.DataFrame({"ts": 1.7e9 + pd.RangeIndex(n), "latency_ms": 10.0, "status": status}).to_csv(
        tmp_path / "requests.csv", index=False
    )
    assert report_of(tmp_path)["facts"]["requests.error_rate"]["value"] == pytest.approx(0.05)


# -- the recorder tells the truth about its sources --------------------------------------------


def _record(tmp_path, **options):
    from diagnose.collectors.recorder import RecordOptions, record

    said: list[str] = []
    settings = RecordOptions(output=tmp_path / "dump", duration_s=1.5, interval_s=0.5, gpu=False, **options)
    summary = record(settings, threading.Event(), say=said.append)
    return summary, said


def test_dead_sources_are_warned_at_once_kept_in_the_manifest_and_shown_by_the_report(tmp_path, run_cli):
    summary, said = _record(
        tmp_path,
        requests_log=str(tmp_path / "no-such.jsonl"),
        metrics_url="http://127.0.0.1:9/metrics",  # the discard port: nothing listens
        pids=(2**22 + 12345,),
    )
    warnings = [line for line in said if "warning" in line]
    assert len(warnings) == 3  # each once, at start, not once a sample
    assert any("no-such.jsonl: no such file" in line for line in warnings)
    assert any("cannot connect" in line for line in warnings)
    assert any("no such process" in line for line in warnings)
    assert len(summary.dead_sources) == 3
    code, text, err = run_cli("file", tmp_path / "dump")
    assert code == 0
    assert "source:   request log" in text and "never reached (no such file or directory)" in text
    assert err.count("the recording holds nothing from") == 3
    _, raw, _ = run_cli("file", tmp_path / "dump", "--format", "json")
    sources = json.loads(raw)["evidence"]["sources"]
    assert {s["status"] for s in sources} == {"never reached"} and len(sources) == 3


def test_strict_turns_a_dead_source_into_exit_2_before_anything_is_written(tmp_path, run_cli):
    code, _, err = run_cli(
        "record", "-o", tmp_path / "dump", "--duration", "2s", "--no-gpu", "--strict",
        "--requests-log", tmp_path / "no-such.jsonl",
    )  # fmt: skip
    assert code == ExitCode.BAD_INPUT and "--strict" in err and "no-such.jsonl" in err
    assert not (tmp_path / "dump").exists() and "recording to" not in err  # nothing said it was recording


def test_a_source_that_is_lost_and_comes_back_is_said_and_recorded():
    from diagnose.collectors.sources import SourceHealth

    said: list[str] = []
    health = SourceHealth(said.append, warn_every_s=60)
    health.add("metrics", "metrics endpoint", "http://127.0.0.1:8000/metrics")
    assert health.update("metrics", 0.0, None)
    assert health.update("metrics", 10.0, "cannot connect")  # lost: said at once
    for second in range(11, 70):
        health.update("metrics", float(second), "cannot connect")  # rate-limited: once more at 70 s
    health.update("metrics", 70.0, "cannot connect")
    entry = health.manifest()["metrics"]
    assert entry["status"] == "lost" and entry["at"] == "1970-01-01T00:00:10Z" and entry["outages"] == 1
    assert sum("still down" in line for line in said) == 1 and sum("warning" in line for line in said) == 2
    health.update("metrics", 80.0, None)
    assert health.manifest()["metrics"]["status"] == "ok" and "delivers again after 70 s" in said[-1]


def test_a_source_that_answers_with_nothing_to_keep_is_neither_down_nor_lost():
    from diagnose.collectors.sources import SourceHealth

    said: list[str] = []
    health = SourceHealth(said.append, warn_every_s=60)
    health.add("metrics", "metrics endpoint", "http://127.0.0.1:8000/metrics")
    assert health.answers_unused("metrics", 0.0, "map it with --metrics-map")
    for second in range(1, 200):  # said once, not every minute
        assert not health.answers_unused("metrics", float(second), "map it with --metrics-map")
    assert len(said) == 1 and "answers, but nothing from it is kept" in said[0]
    entry = health.manifest()["metrics"]
    assert entry["status"] == "answers, nothing kept" and entry["reason"] == "map it with --metrics-map"
    assert health.update("metrics", 200.0, "cannot connect")  # then it goes down: that is an outage
    assert health.manifest()["metrics"]["status"] == "lost"
    assert health.update("metrics", 210.0, None)  # and back with metrics it keeps
    assert health.manifest()["metrics"]["status"] == "ok"


@pytest.mark.parametrize("command", [("file",), ("live", "--replay")])
def test_a_folder_that_holds_a_dump_one_level_down_names_it(run_cli, tmp_path, command):
    """As the testbed keeps its recordings (RUN/dump/ beside truth.yaml), and as incidents get wrapped."""
    import shutil

    shutil.copytree(FIXTURE, tmp_path / "run" / "dump")
    (tmp_path / "run" / "truth.yaml").write_text("scenario: cpu-bound-stage\ncause: cpu-bound-stage\n")
    code, _, err = run_cli(*command, tmp_path / "run")
    assert code == ExitCode.BAD_INPUT
    assert f"but {tmp_path / 'run' / 'dump'} is one: give that folder" in err
    (tmp_path / "empty").mkdir()
    code, _, err = run_cli("file", tmp_path / "empty")
    assert code == ExitCode.BAD_INPUT and "no tables found" in err and "give" not in err


def test_usage_errors_count_in_words(run_cli, tmp_path):
    code, _, err = run_cli("compare", str(FIXTURE))
    assert code == ExitCode.BAD_INPUT and err.rstrip().endswith("got 1 dump")
    code, _, err = run_cli("record", "-o", str(tmp_path / "d"), "--trigger", "event oom")
    assert code == ExitCode.BAD_INPUT and "--trigger needs --ring SPAN: it sets up the flight recorder" in err


def test_the_rules_list_aligns_its_titles_whatever_the_ids_length(run_cli):
    code, out, _ = run_cli("rules", "list")
    lines = out.splitlines()
    assert code == 0 and len(lines) > 10
    starts = {len(line) - len(line.split("  ", 1)[1].lstrip()) for line in lines}
    assert len(starts) == 1


def test_file_help_shows_examples_and_that_one_file_is_a_dump(run_cli, capsys):
    with pytest.raises(SystemExit):
        run_cli("file", "--help")
    out = capsys.readouterr().out
    assert "examples:" in out and "diagnose file vllm.log" in out and "one file read as a dump" in out


def test_a_report_wraps_to_a_terminal_and_not_into_a_file_or_a_pipe(monkeypatch):
    """A terminal has a width; a file or a pipe (`| cat`, `-o rep.txt`) has none: lines as long as their
    content there, unless --width or COLUMNS says otherwise."""
    import os

    from diagnose.commands import output

    class Stream:
        def __init__(self, tty: bool, fd: int) -> None:
            self.tty, self.fd = tty, fd

        def isatty(self) -> bool:
            return self.tty

        def fileno(self) -> int:
            return self.fd

    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr(output.os, "get_terminal_size", lambda fd: os.terminal_size((80, 24)))
    monkeypatch.setattr(output.sys, "stdout", Stream(True, 1))
    assert output.report_width(None, to_file=False) == 80
    assert output.report_width(None, to_file=True) is None  # -o rep.txt
    monkeypatch.setattr(output.sys, "stdout", Stream(False, 1))
    assert output.report_width(None, to_file=False) is None  # | cat
    assert output.report_width(120, to_file=False) == 120 and output.report_width(0, to_file=False) is None
    monkeypatch.setenv("COLUMNS", "132")
    assert output.report_width(None, to_file=True) == 132


def test_a_report_into_a_file_keeps_each_line_whole(run_cli, tmp_path):
    code, _, err = run_cli("file", DUMPS / "cpu-bound-stage", "-o", tmp_path / "rep.txt")
    assert code == 0, err
    text = (tmp_path / "rep.txt").read_text()
    assert max(len(line) for line in text.splitlines()) > 100  # a long evidence line, not cut at 100
    code, _, err = run_cli("file", DUMPS / "cpu-bound-stage", "-o", tmp_path / "narrow.txt", "--width", "70")
    narrow = (tmp_path / "narrow.txt").read_text()
    prose = [line for line in narrow.splitlines() if line.startswith(("   ", "  -")) and "|" not in line]
    assert prose and max(len(line) for line in prose) <= 70


def test_recording_into_a_folder_that_is_not_empty_is_refused_before_it_says_it_records(run_cli, tmp_path):
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "notes.txt").write_text("mine")
    code, _, err = run_cli("record", "-o", tmp_path / "old", "--duration", "1s", "--no-gpu")
    assert code == ExitCode.BAD_INPUT and "already exists and is not empty" in err
    assert "recording to" not in err and (tmp_path / "old" / "notes.txt").read_text() == "mine"


def test_a_dump_without_latencies_says_why_at_the_top_and_why_it_has_no_gpu(run_cli, tmp_path):
    """The reason sits beside the statement it explains, not only in the sources at the end."""
    import yaml

    dump = tmp_path / "rec"
    dump.mkdir()
    rows = "\n".join(f"{1764460800 + i},{20 + i % 7}" for i in range(60))
    (dump / "system.csv").write_text("ts,cpu_pct\n" + rows + "\n")
    source = {"kind": "request log", "target": "/var/log/app.jsonl", "status": "never reached"}
    manifest = {
        "format": "diagnose-dump/1",
        "gpu_note": "NVML: driver not loaded",
        "sources": {"requests_log": {**source, "reason": "no such file or directory"}},
    }
    (dump / "manifest.yaml").write_text(yaml.safe_dump(manifest))
    code, out, err = run_cli("file", dump)
    assert code == 0, err
    top = out.split("HYPOTHESES")[0].split("No rule found")[0]
    assert (
        "No request latencies in the dump: the request log /var/log/app.jsonl was never reached "
        "(no such file or directory)." in top
    )
    assert "no GPU figures: NVML: driver not loaded (the recorder's note)" in err
