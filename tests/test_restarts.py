"""Restarts from every form of evidence: stated (manifest, events) or shown by the pid that was replaced."""

from __future__ import annotations

import pandas as pd

from diagnose.dump import load_dump
from diagnose.facts.restarts import replacements, restart_times

T0 = 1_764_460_800.0


def _rows(pid: int, begin: int, end: int, name: str = "python", cmdline: str = "python -m serve") -> list:
    return [
        {"ts": T0 + t, "pid": pid, "name": name, "cmdline": cmdline, "cpu_pct": 50.0}
        for t in range(begin, end)
    ]


def _table(*parts: list) -> pd.DataFrame:
    return pd.DataFrame([row for part in parts for row in part])


def test_a_pid_replaced_by_one_of_the_same_name_and_command_line_is_a_restart():
    table = _table(_rows(4242, 0, 100), _rows(4243, 108, 200), _rows(901, 0, 200, "node_exporter", "ne"))
    [found] = replacements(table)
    assert (found.old_pid, found.new_pid, found.name) == (4242, 4243, "python")
    assert found.at == T0 + 99  # the old process's last sample: the new one was born after it


def test_where_the_server_is_named_only_its_own_lineage_restarts():
    # a command run twice beside the server (a CLI, a cron job): replaced just the same, but its start
    # warms nothing the server's requests wait for
    cli = _table(
        _rows(7824, 0, 40, cmdline="diagnose rules test"), _rows(7929, 45, 90, cmdline="diagnose rules test")
    )
    server = _table(_rows(7559, 0, 200, name="llama-server", cmdline="llama-server -m model.gguf"))
    both = pd.concat([cli, server])
    assert [r.old_pid for r in replacements(both)] == [7824]  # nothing names the server: any lineage
    assert replacements(both, frozenset({7559})) == []
    restarted = pd.concat([cli, _table(_rows(4242, 0, 100), _rows(4243, 108, 200))])
    assert [r.new_pid for r in replacements(restarted, frozenset({4243}))] == [4243]


def test_a_pool_of_workers_whose_pids_overlap_is_no_restart():
    # two workers alive at once, one recycled: a pool doing its work, not the server restarting
    table = _table(_rows(10, 0, 100), _rows(11, 0, 200), _rows(12, 105, 200))
    assert replacements(table) == []


def test_another_process_a_stray_row_or_a_process_seen_now_and_then_is_no_restart():
    other = _table(_rows(4242, 0, 100), _rows(5000, 110, 200, cmdline="python job.py"))
    assert replacements(other) == []
    stray = _table(_rows(4242, 0, 100), _rows(4243, 150, 151))
    assert replacements(stray) == []
    # in the busiest-processes list only now and then: 10 samples over 100 s of life
    spotty = _table([r for r in _rows(4242, 0, 100) if r["ts"] % 10 == 0], _rows(4243, 110, 200))
    assert replacements(spotty) == []
    late = _table(_rows(4242, 0, 100), _rows(4243, 1000, 1100))  # an hour's gap: not a replacement
    assert replacements(late) == []


def test_restart_times_read_the_lineage_and_keep_a_stated_restart_once(tmp_path):
    _table(_rows(4242, 0, 100), _rows(4243, 108, 200)).to_csv(tmp_path / "processes.csv", index=False)
    starts, source = restart_times(load_dump(str(tmp_path)))
    assert starts == [T0 + 99]
    assert "processes.csv: the pid replaced" in source and "python pid 4242 -> 4243" in source
    (tmp_path / "events.jsonl").write_text(f'{{"ts": {T0 + 104}, "kind": "restart"}}\n')
    starts, source = restart_times(load_dump(str(tmp_path)))
    assert starts == [T0 + 104] and "pid replaced" not in source


def test_the_recorded_restart_replayed_without_its_restart_event_is_found_by_its_pid(tmp_path, run_cli):
    """The testbed's recorded cold start, with the recorder's own restart detection taken out: the
    pid lineage in its process table finds the same restart, and the same diagnosis follows."""
    import gzip
    import json
    import shutil

    from tests.conftest import ROOT

    dump = tmp_path / "dump"
    shutil.copytree(ROOT / "fixtures" / "recorded" / "cold-start-contamination" / "dump", dump)
    events = dump / "events.jsonl.gz"
    kept = [line for line in gzip.open(events, "rt") if json.loads(line)["kind"] != "restart"]
    with gzip.open(events, "wt") as handle:
        handle.writelines(kept)
    code, out, err = run_cli("file", dump, "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    top = report["hypotheses"][0]
    assert top["id"] == "cold-start-contamination" and top["score"] >= 0.5
    assert "the pid replaced by one of the same name" in report["facts"]["coldstart.restarts"]["source"]


def test_the_engine_states_its_restart_by_a_new_process_start_time_or_counters_that_went_back():
    from diagnose.engines.metrics import engine_maps, engine_row

    vllm = engine_maps()["vllm"]
    before = {"vllm:generation_tokens_total": 5000.0, "vllm:request_success_total": 90.0}
    after = {"vllm:generation_tokens_total": 120.0, "vllm:request_success_total": 2.0}
    after |= {"process_start_time_seconds": T0 + 55}
    row = engine_row(vllm, T0 + 60, after, before, 5.0)
    assert row["counter_resets"] == 1 and row["process_start"] == T0 + 55
    assert "tokens_per_s" not in row and "throughput_rps" not in row  # counters of two processes
    onward = {"vllm:generation_tokens_total": 5600.0, "vllm:request_success_total": 95.0}
    row = engine_row(vllm, T0 + 65, onward, before, 5.0)
    assert "counter_resets" not in row and row["tokens_per_s"] == 120.0


def test_restart_times_read_the_engines_own_metrics(tmp_path):
    """A new process start time is stamped at itself; counters that went back with no start time, at the
    scrape before them, or 10 s before the scrape that showed them after a longer silence."""
    ts = [T0 + t for t in (0, 1, 2, 3, 50, 51)]
    born = [T0 - 500] * 4 + [T0 + 45] * 2
    pd.DataFrame({"ts": ts, "running": 3, "process_start": born}).to_csv(tmp_path / "server.csv", index=False)
    starts, source = restart_times(load_dump(str(tmp_path)))
    assert starts == [T0 + 45] and "process_start_time_seconds moved on" in source
    resets = [None, None, None, None, 1, None]
    pd.DataFrame({"ts": ts, "running": 3, "counter_resets": resets}).to_csv(
        tmp_path / "server.csv", index=False
    )
    starts, source = restart_times(load_dump(str(tmp_path)))
    assert starts == [T0 + 40] and "counters went back" in source
    resets = [None, 1, None, None, None, None]
    pd.DataFrame({"ts": ts, "running": 3, "counter_resets": resets}).to_csv(
        tmp_path / "server.csv", index=False
    )
    assert restart_times(load_dump(str(tmp_path)))[0] == [T0]
    steady = [T0 - 500.4, T0 - 500.0, T0 - 499.6, T0 - 500.0, T0 - 500.0, T0 - 500.0]  # rounding, no restart
    pd.DataFrame({"ts": ts, "running": 3, "process_start": steady}).to_csv(
        tmp_path / "server.csv", index=False
    )
    assert restart_times(load_dump(str(tmp_path)))[0] == []
