"""The report contract (docs/report-json.md), exit codes, and the golden Markdown."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from tests.conftest import DUMPS, ROOT

ISO = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$")
GOLDEN = ROOT / "tests" / "golden"


@pytest.fixture(scope="module")
def report(request):
    from diagnose.pipeline import analyse

    return analyse(str(DUMPS / "memory-fragmentation"))


def test_json_report_follows_the_contract(report_of):
    report = report_of(DUMPS / "memory-fragmentation")
    assert report["format"] == "diagnose-report/1"
    assert report["dump"] == str(DUMPS / "memory-fragmentation")
    assert ISO.match(report["window"]["start"]) and ISO.match(report["window"]["end"])
    evidence = report["evidence"]
    assert evidence["tables"]["requests"]["files"] == ["requests.csv.gz"]
    assert evidence["tables"]["requests"]["rows"] > 1000
    assert "server" in evidence["missing"]
    assert {"importers", "not_used", "warnings"} <= set(evidence)
    summary = report["summary"]
    assert set(summary["latency_ms"]) >= {"p50", "p95", "p99", "p999", "mean"}
    lat = summary["latency_ms"]
    assert lat["p50"] <= lat["p95"] <= lat["p99"] <= lat["p999"]
    # The fixture's network time is in latency_ms but not in any stage column.
    assert 0.9 < sum(s["share"] for s in summary["stages"].values()) < 1.0
    assert {"share", "p50_ms", "p99_ms"} <= set(summary["stages"]["forward"])
    assert isinstance(report["signals"], dict) and isinstance(report["alignments"], list)
    scores = [h["score"] for h in report["hypotheses"]]
    assert scores == sorted(scores, reverse=True) and all(0 <= s <= 1 for s in scores)
    for h in report["hypotheses"]:
        assert {"id", "rule", "title", "score", "confidence", "evidence", "verify", "remedy"} <= set(h)
        assert all({"text", "value"} <= set(e) for e in h["evidence"])
    assert all({"rule", "missing"} <= set(r) for r in report["not_run"])


def test_every_evidence_number_cites_the_facts_it_came_from(report):
    assert report.hypotheses
    for h in report.hypotheses:
        for line in (*h.evidence, *h.contrary):
            assert line.facts and set(line.facts) <= set(report.facts), line
            assert line.sources == tuple(dict.fromkeys(report.facts[n].source for n in line.facts))


def test_per_window_percentiles_cover_the_dump(report_of):
    summary = report_of(DUMPS / "memory-fragmentation")["summary"]
    windows = summary["windows"]
    assert len(windows) >= 5
    assert sum(w["requests"] for w in windows) == summary["requests"]
    assert all(isinstance(w["requests"], int) and ISO.match(w["start"]) for w in windows)


def test_fail_on_turns_a_likely_finding_into_exit_1(run_cli):
    dump = DUMPS / "cpu-bound-stage"
    assert run_cli("file", dump, "--format", "json", "--fail-on", "0.5")[0] == 1
    assert run_cli("file", DUMPS / "healthy-steady", "--format", "json", "--fail-on", "0.5")[0] == 0


@pytest.mark.parametrize("args", [("--fail-on", "2"), ("--format", "pdf"), ("--slo-p99-ms", "-3")])
def test_bad_arguments_exit_2(run_cli, args):
    with pytest.raises(SystemExit) as stop:
        run_cli("file", DUMPS / "healthy-steady", *args)
    assert stop.value.code == 2


def test_slo_option_feeds_the_rules(report_of):
    report = report_of(DUMPS / "healthy-steady", "--slo-p99-ms", "50")
    assert report["facts"]["latency.p99_over_slo"]["value"] > 1
    assert report["facts"]["slo.p99_ms"]["value"] == 50


def test_output_file_option_writes_the_report(run_cli, tmp_path):
    target = tmp_path / "report.md"
    code, out, err = run_cli("file", DUMPS / "cpu-bound-stage", "--format", "markdown", "-o", target)
    assert code == 0 and out == "" and str(target) in err
    assert target.read_text(encoding="utf-8").startswith("# diagnose report")


def test_text_report_shows_hypothesis_verification_and_what_was_not_checked(run_cli):
    code, out, _ = run_cli("file", DUMPS / "cpu-bound-stage")
    assert code == 0
    assert re.search(r"1\. \[(0\.\d\d|1\.00) ", out) and "A CPU-side stage is the bottleneck" in out
    assert "Verify:" in out and "Pitfalls:" in out
    assert "NOT CHECKED (missing evidence)" in out and "RULED OUT" in out


# Reports of different shapes: a CPU-side finding with its stage table, an LLM service with TTFT/TPOT
# and engine gauges, an OOM read from the allocator's figures, a periodic job with episodes and
# alignments, a healthy service with nothing likely, and a real recording from the testbed.
GOLDEN_REPORTS = [
    ("fixtures/dumps/cold-start-contamination", "markdown", "cold-start-contamination.md"),
    ("fixtures/dumps/kv-cache-pressure", "markdown", "kv-cache-pressure.md"),
    ("fixtures/dumps/memory-fragmentation", "text", "memory-fragmentation.txt"),
    ("fixtures/dumps/co-located-contention", "markdown", "co-located-contention.md"),
    ("fixtures/dumps/healthy-steady", "text", "healthy-steady.txt"),
    ("fixtures/recorded/cpu-bound-stage/dump", "markdown", "recorded-cpu-bound-stage.md"),
]


@pytest.mark.parametrize(("dump", "form", "name"), GOLDEN_REPORTS, ids=[g[2] for g in GOLDEN_REPORTS])
def test_the_report_matches_its_golden_file(run_cli, dump, form, name):
    """Regenerate with UPDATE_GOLDEN=1 after an intended change, and review the diff."""
    wrapped = ["--width", "100"] if form == "text" else []  # as a 100-column terminal shows it
    code, out, err = run_cli("file", dump, "--format", form, *wrapped)
    assert code == 0 and "This is a bug" not in err, err
    golden = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(out, encoding="utf-8")
    assert out == golden.read_text(encoding="utf-8")


def test_internal_errors_exit_3_with_a_request_to_report(tmp_path):
    script = (
        "import diagnose.pipeline as p, diagnose.cli as c\n"
        "def boom(*a, **k): raise ZeroDivisionError('simulated bug')\n"
        "p.analyse_path = boom\n"
        f"raise SystemExit(c.main(['file', {str(DUMPS / 'healthy-steady')!r}]))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 3
    assert "internal error" in result.stderr and "--debug" in result.stderr
    assert "Traceback" not in result.stderr


def test_python_dash_m_and_version(tmp_path):
    result = subprocess.run([sys.executable, "-m", "diagnose", "--version"], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.startswith("diagnose ")


@pytest.mark.parametrize("command", [["formats"], ["rules", "list"], ["file", str(DUMPS / "healthy-steady")]])
def test_a_reader_that_goes_away_ends_the_command_quietly(command):
    """`diagnose ... | head`: the pipe is closed before anything is written, as a reader that has what
    it wanted leaves it; the command ends as SIGPIPE ends a tool, with no message."""
    process = subprocess.Popen(
        [sys.executable, "-m", "diagnose", *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    process.stdout.close()
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=120) == 141, stderr
    assert stderr == ""


def test_what_a_rule_needs_keeps_its_angle_brackets_in_markdown(tmp_path):
    """`stage_<name>_ms` is no HTML tag, but a Markdown viewer (and the live view's `o` panel) drops it
    as one unless its `<` is escaped."""
    from diagnose.pipeline import analyse
    from diagnose.report.markdown import render_not_found

    rows = "\n".join(f"{1764460800 + i},{20 + i % 7}" for i in range(120))
    (tmp_path / "system.csv").write_text("ts,cpu_pct\n" + rows + "\n")
    lines = "\n".join(render_not_found(analyse(str(tmp_path))))
    assert "stage_\\<name>_ms" in lines and "stage_<name>" not in lines


def test_findings_below_the_likely_line_are_under_their_own_heading(run_cli):
    """A 0.07 finding is not one of the "most likely" hypotheses, and a report with nothing likely says so."""
    code, out, _ = run_cli("file", DUMPS / "near-miss-launch-bound-forward")
    assert code == 0 and "HYPOTHESES (most likely first)" not in out
    assert "No likely root cause: no finding scored 0.5 or more." in out and "LESS LIKELY (below 0.5" in out
    code, out, _ = run_cli("file", DUMPS / "kv-cache-pressure", "--format", "markdown")
    likely, less = out.index("## Hypotheses"), out.index("## Less likely")
    assert likely < out.index("kv-cache-pressure", likely) < less


@pytest.mark.parametrize(
    "command",
    [
        ("file", str(DUMPS / "co-located-contention"), "--format", "json"),
        ("file", str(DUMPS / "kv-cache-pressure"), "--format", "markdown"),
        ("file", str(DUMPS / "memory-fragmentation")),
        (
            "compare",
            str(ROOT / "fixtures/pairs/improved-p99/before"),
            str(ROOT / "fixtures/pairs/improved-p99/after"),
        ),
        (
            "compare",
            str(ROOT / "fixtures/pairs/no-change/before"),
            str(ROOT / "fixtures/pairs/no-change/after"),
            "--format",
            "json",
        ),
        ("rules", "list"),
        ("formats",),
    ],
    ids=["file-json", "file-markdown", "file-text", "compare-text", "compare-json", "rules", "formats"],
)
def test_the_same_input_gives_the_same_bytes(run_cli, command):
    """Seeded resampling and stable ordering: a report diffed against yesterday's shows what changed."""
    first, second = run_cli(*command), run_cli(*command)
    assert first[0] == 0 and first[1] and first == second


def test_the_spikes_table_keeps_other_processes_out_unless_a_finding_names_them(run_cli, tmp_path):
    """On a busy host, every process that spiked once would fill the table: another process than the
    server (the manifest names it) stays out unless a finding or an alignment names it."""
    import numpy as np
    import yaml

    rng = np.random.default_rng(0)
    lines = ["ts,pid,name,cpu_pct"]
    for t in range(900):
        burst = any(s <= t < s + 12 for s in (150, 400, 650))
        lines.append(f"{1764460800 + t},100,server,{50 + rng.normal(0, 2):.1f}")
        lines.append(f"{1764460800 + t},200,backup,{(90 if burst else 5) + rng.normal(0, 1):.1f}")
    (tmp_path / "processes.csv").write_text("\n".join(lines) + "\n")
    (tmp_path / "manifest.yaml").write_text(
        yaml.safe_dump({"format": "diagnose-dump/1", "server_pids": [100]})
    )
    code, out, _ = run_cli("file", tmp_path, "--format", "json")
    assert code == 0 and json.loads(out)["signals"]["processes.cpu_pct[pid=200]"]["meta"]["server"] is False
    code, out, _ = run_cli("file", tmp_path)
    assert code == 0 and "processes.cpu_pct[pid=200]" not in out
    assert "1 other process signal left out" in out
    said = " ".join(out.split())
    assert "episodes: spells away from the signal's own usual level" in said
    assert "coincidence:" not in said  # no latency spikes, no alignment table: its columns are not said
    (tmp_path / "manifest.yaml").write_text(yaml.safe_dump({"format": "diagnose-dump/1"}))
    code, out, _ = run_cli("file", tmp_path)  # the heaviest steady process is the server: the same
    assert code == 0 and "processes.cpu_pct[pid=200]" not in out


@pytest.mark.parametrize(
    ("count", "said"), [(0, "0 GPUs"), (1, "1 GPU"), (2, "2 GPUs"), (1204, "1,204 GPUs")]
)
def test_a_count_says_its_noun_in_the_number_it_takes(count, said):
    from diagnose.units import counted

    assert counted(count, "GPU") == said
    assert (
        counted(1, "process", "processes") == "1 process"
        and counted(3, "process", "processes") == "3 processes"
    )


def test_no_message_writes_a_count_with_a_noun_in_brackets():
    """ "1 row(s)" reads as a program that did not count: every f-string that puts a figure before a noun
    in "(s)" goes through units.counted (docs and comments may still say "pid(s)")."""
    import ast

    found = []
    for path in sorted((ROOT / "diagnose").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.JoinedStr):
                text = "".join(p.value if isinstance(p, ast.Constant) else "{}" for p in node.values)
                if "(s)" in text:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {text}")
    assert found == []
