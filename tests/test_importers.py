"""Importers: foreign files recognised by content, on our own samples and the real ones."""

from __future__ import annotations

import json

import pytest

from diagnose.dump import load_dump
from diagnose.importers import Source, recognise
from tests.conftest import ROOT
from tests.helpers.samples import EXPECTED, LOOK_ALIKES, NOTHING_TO_KEEP, SAMPLES

VLLM_LOG = """INFO 04-01 23:40:00 [engine.py:100] Avg prompt throughput: 10.0 tokens/s
ERROR 04-01 23:46:56 [engine.py:160] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 546.00 MiB. GPU 0 has a total capacity of 15.77 GiB of which 514.19 MiB is free. Process 562167 has 15.25 GiB memory in use. Of the allocated memory 13.73 GiB is allocated by PyTorch, and 736.86 MiB is reserved by PyTorch but unallocated.
ERROR 04-01 23:50:01 [engine.py:160] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 300.00 MiB. GPU 0 has a total capacity of 15.77 GiB of which 100.00 MiB is free. Process 562167 has 15.60 GiB memory in use. Of the allocated memory 13.00 GiB is allocated by PyTorch, and 2.10 GiB is reserved by PyTorch but unallocated.
"""
SMI_CSV = """timestamp, index, name, utilization.gpu [%], memory.used [MiB], memory.total [MiB], power.draw [W], clocks_throttle_reasons.active
2025/04/01 23:46:50.000, 0, NVIDIA A10G, 91 %, 15800 MiB, 16150 MiB, [N/A], 0x0000000000000004
2025/04/01 23:46:51.000, 0, NVIDIA A10G, 88 %, 15810 MiB, 16150 MiB, [Not Supported], 0x0000000000000000
"""


def test_a_folder_of_foreign_files_is_analysed_and_the_report_names_each_importer(tmp_path, report_of):
    (tmp_path / "vllm.log").write_text(VLLM_LOG)
    (tmp_path / "nvidia-smi.csv").write_text(SMI_CSV)
    (tmp_path / "notes.txt").write_text("paged at 23:47, restarted at 23:55")
    report = report_of(tmp_path)
    used = {entry["file"]: entry for entry in report["evidence"]["importers"]}
    # vLLM's own line format: its stats line and its two OOMs, read together
    assert used["vllm.log"]["importer"] == "vllm-log" and used["vllm.log"]["rows"] == 3
    assert used["nvidia-smi.csv"]["importer"] == "nvidia-smi-csv" and used["nvidia-smi.csv"]["rows"] == 2
    assert report["evidence"]["not_used"] == ["notes.txt"]
    assert any("read as UTC" in w for w in report["evidence"]["warnings"])
    top = report["hypotheses"][0]
    assert top["id"] == "memory-fragmentation" and top["score"] >= 0.5


def test_oom_events_take_the_log_lines_time_and_class(tmp_path):
    (tmp_path / "vllm.log").write_text(VLLM_LOG)
    events = load_dump(str(tmp_path)).tables["events"]
    assert list(events["ts_source"]) == ["log line", "log line"]
    assert (events["ts"].diff().dropna() == 185).all()
    # the first OOM's 737 MiB stranded is 4.6 % of a card the engine fills (the allocator's slack);
    # the second's 2.10 GiB, 13 %, is fragmentation
    assert list(events["oom_class"]) == [
        "exhaustion: the serving engine's preallocated KV cache leaves no headroom",
        "fragmentation",
    ]


def test_nvidia_smi_values_with_units_and_not_supported(tmp_path):
    (tmp_path / "smi.csv").write_text(SMI_CSV)
    gpu = load_dump(str(tmp_path)).tables["gpu"]
    assert list(gpu["util_pct"]) == [91, 88]
    assert gpu["mem_used_bytes"].iloc[0] == 15800 * 2**20
    assert gpu["power_w"].isna().all()
    assert list(gpu["throttle_reasons"]) == [4, 0]


def test_a_headerless_nvidia_smi_csv_is_not_guessed(tmp_path):
    (tmp_path / "smi.csv").write_text("91 %, 15800 MiB, 16150 MiB\n")
    (tmp_path / "requests.csv").write_text("ts,latency_ms\n1,2\n")
    assert load_dump(str(tmp_path)).not_used == ["smi.csv"]


def test_xid_lines_in_journal_form_carry_meaning_and_fatality(tmp_path):
    (tmp_path / "kern.log").write_text(
        "Nov 29 11:28:11 zeus kernel: NVRM: Xid (PCI:0000:c1:00): 79, pid=123, name=python3, GPU has fallen off the bus.\n"
        "Nov 29 11:28:12 zeus kernel: NVRM: Xid (PCI:0000:c1:00): 13, Graphics Exception\n"
    )
    events = load_dump(str(tmp_path)).tables["events"]
    assert list(events["xid"]) == [79, 13]
    assert list(events["fatal"]) == [True, False]
    assert events["process"].iloc[0] == "python3"


def test_binary_files_are_never_offered_to_importers(tmp_path):
    (tmp_path / "core.dump").write_bytes(b"\x00\x01CUDA out of memory\x00")
    (tmp_path / "requests.csv").write_text("ts,latency_ms\n1,2\n")
    assert load_dump(str(tmp_path)).not_used == ["core.dump"]


def test_formats_command_lists_every_importer_and_the_docs_describe_it(run_cli):
    from diagnose.importers import IMPORTERS

    code, out, _ = run_cli("formats")
    assert code == 0
    rows = (ROOT / "docs" / "importers.md").read_text(encoding="utf-8").splitlines()
    named = {
        name.strip(" `")
        for line in rows
        if line.startswith("| `")
        for name in line.split(" | ")[0][2:].split(",")
    }
    for importer in IMPORTERS:
        assert importer.name and importer.description and importer.example, importer
        assert importer.name in out
        assert importer.name in named, (
            f"{importer.name}: no row in docs/importers.md (docs/extending.md#an-importer)"
        )


VLLM_V1 = (
    "2026-05-12T08:01:39.331095044Z (APIServer pid=1) INFO 05-12 08:01:39 [loggers.py:271] Engine 000: "
    "Avg prompt throughput: 6335.3 tokens/s, Avg generation throughput: 4.8 tokens/s, Running: 9 reqs, "
    "Waiting: 3 reqs, GPU KV cache usage: 62.8%, Prefix cache hit rate: 10.0%\n"
    "WARNING 05-12 08:01:45 scheduler.py:1] Sequence group 221 is preempted by PreemptionMode.RECOMPUTE mode "
    "because there is not enough KV cache space. total_num_cumulative_preemption=101\n"
)
SCRAPES = """# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting 2 1764460800000
# TYPE vllm:request_success counter
vllm:request_success_total 100 1764460800000
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting 5 1764460810000
# TYPE vllm:request_success counter
vllm:request_success_total 150 1764460810000
"""


def test_vllm_stats_lines_become_server_rows_and_preemptions_events(tmp_path):
    (tmp_path / "engine.log").write_text(VLLM_V1)
    dump = load_dump(str(tmp_path))
    row = dump.tables["server"].iloc[0]
    assert (row["running"], row["queue_depth"], row["kv_cache_usage_pct"]) == (9, 3, 62.8)
    assert row["ts"] == 1778572899.0  # 2026-05-12T08:01:39Z: the year comes from the docker prefix
    event = dump.tables["events"].iloc[0]
    assert event["kind"] == "preemption" and event["cumulative"] == 101


def test_several_timed_scrapes_in_one_file_give_rates(tmp_path):
    (tmp_path / "metrics.txt").write_text(SCRAPES)
    server = load_dump(str(tmp_path)).tables["server"]
    assert list(server["queue_depth"]) == [2, 5]
    assert server["throughput_rps"].iloc[1] == 5.0


def test_a_dcgm_scrape_between_notes_with_one_sample_quoted_is_read(tmp_path):
    labels = '{gpu="0",UUID="GPU-603a8873",GPU_I_PROFILE="2g.12gb",GPU_I_ID="1",pod=""}'
    (tmp_path / "steps.txt").write_text(
        "1. kubectl rollout restart ds dcgm-exporter\n2. curl 10.10.204.252:9400/metrics\n\n"
        f"> DCGM_FI_PROF_GR_ENGINE_ACTIVE{labels} 0.381124\n"
        f"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{labels} 0.022137\nDCGM_FI_PROF_DRAM_ACTIVE{labels} 0.25\n"
    )
    gpu = load_dump(str(tmp_path)).tables["gpu"].iloc[0]
    assert (gpu["mig_instance"], gpu["util_pct"], gpu["mem_bw_util_pct"]) == ("1", 38.1124, 25.0)


def test_dcgm_fields_a_user_adds_to_the_exporter_give_the_clock_ceiling_reasons_and_limits(tmp_path):
    """Fields DCGM defines that the exporter's shipped counters leave out (metrics/dcgm-exporter.yaml):
    the maximum SM clock, the clock event reasons, the card's total, the power limit and its default."""
    labels = '{gpu="1",UUID="GPU-9b1f",modelName="NVIDIA A100-SXM4-40GB"}'
    (tmp_path / "dcgm.prom").write_text(
        f"DCGM_FI_DEV_SM_CLOCK{labels} 1095\nDCGM_FI_DEV_MAX_SM_CLOCK{labels} 1410\n"
        f"DCGM_FI_DEV_CLOCKS_EVENT_REASONS{labels} 4\nDCGM_FI_DEV_FB_USED{labels} 30000\n"
        f"DCGM_FI_DEV_FB_FREE{labels} 10000\nDCGM_FI_DEV_FB_TOTAL{labels} 40960\n"
        f"DCGM_FI_DEV_POWER_MGMT_LIMIT{labels} 300\nDCGM_FI_DEV_POWER_MGMT_LIMIT_DEF{labels} 400\n"
    )
    gpu = load_dump(str(tmp_path)).tables["gpu"].iloc[0]
    assert (gpu["gpu"], gpu["sm_clock_mhz"], gpu["max_sm_clock_mhz"], gpu["throttle_reasons"]) == (
        1,
        1095,
        1410,
        4,
    )
    assert gpu["mem_total_bytes"] == 40960 * 2**20  # the field, not used + free
    assert (gpu["power_limit_w"], gpu["default_power_limit_w"]) == (300, 400)


def test_dcgm_exporters_clock_event_counts_are_the_reasons_its_window_saw(tmp_path):
    """DCGM_EXP_CLOCK_EVENTS_COUNT: one sample per reason (clock_event), counted over the exporter's
    window; the reasons seen are the row's NVML bits, those counted zero are not."""
    labels = 'gpu="0",UUID="GPU-b9f9",window_size_in_ms="300000"'
    (tmp_path / "dcgm.prom").write_text(
        "# TYPE DCGM_EXP_CLOCK_EVENTS_COUNT gauge\n"
        f'DCGM_EXP_CLOCK_EVENTS_COUNT{{{labels},clock_event="gpu_idle"}} 2\n'
        f'DCGM_EXP_CLOCK_EVENTS_COUNT{{{labels},clock_event="sw_thermal"}} 1\n'
        f'DCGM_EXP_CLOCK_EVENTS_COUNT{{{labels},clock_event="hw_thermal"}} 1\n'
        f'DCGM_EXP_CLOCK_EVENTS_COUNT{{{labels},clock_event="power_cap"}} 0\n'
    )
    gpu = load_dump(str(tmp_path)).tables["gpu"]
    assert len(gpu) == 1 and gpu["throttle_reasons"].iloc[0] == 0x1 | 0x20 | 0x40


def test_a_scrape_with_a_label_set_the_paste_shortened_keeps_its_other_samples(tmp_path):
    """prometheus_client's parser refuses a whole page for one bad line; the person pasting wrote
    ``{...,reason="capacity"}`` for a label set they did not want to copy."""
    labels = '{engine="0",model_name="qwen"}'
    (tmp_path / "metrics.txt").write_text(
        f"vllm:num_requests_running{labels} 0.0\nvllm:num_requests_waiting{labels} 6.0\n"
        'vllm:num_requests_waiting_by_reason{...,reason="capacity"} 6.0\n'
        f"vllm:kv_cache_usage_perc{labels} 0.0\n"
    )
    dump = load_dump(str(tmp_path))
    server = dump.tables["server"].iloc[0]
    assert (server["queue_depth"], server["running"]) == (6.0, 0.0)
    assert any("1 sample line the parser refused left out" in w for w in dump.warnings), dump.warnings


def test_a_vllm_stats_line_cut_before_its_level_keeps_its_time_and_one_without_a_time_is_left_out(tmp_path):
    stats = (
        "Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 122.2 tokens/s, Running: 20 reqs, "
        "Swapped: 0 reqs, Pending: 9 reqs, GPU KV cache usage: 24.8%, CPU KV cache usage: 0.0%"
    )
    (tmp_path / "vllm.log").write_text(
        f"11-21 00:12:08 llm_engine.py:624] {stats}\n"  # the paste's cut took "INFO " away
        f"INFO 11-21 00:12:13 llm_engine.py:624] {stats}\n"
        f"{stats}\n"  # no time at all: the file's would put it weeks away
    )
    dump = load_dump(str(tmp_path))
    ts = dump.tables["server"]["ts"].to_numpy()
    assert len(ts) == 2 and ts[1] - ts[0] == 5
    assert any("1 of its stats lines had no time of their own" in w for w in dump.warnings), dump.warnings


def _vllm_v1_stats_log(busy_ticks: set[int], ticks: int, every_s: int = 10) -> str:
    """vLLM V1's stats lines as its LoggingStatLogger writes them (v1/metrics/loggers.py): a line every
    ``every_s``, its throughput over the interval before it, at debug (not shown) where that interval
    and the one before had none."""
    lines, last = [], 0.0
    for tick in range(1, ticks + 1):
        generated = 40.0 if tick in busy_ticks else 0.0
        if generated or last:
            clock = f"{tick * every_s // 3600:02d}:{tick * every_s // 60 % 60:02d}:{tick * every_s % 60:02d}"
            lines.append(
                f"(APIServer pid=7) INFO 11-21 {clock} [loggers.py:123] Engine 000: Avg prompt throughput: "
                f"{generated * 3:.1f} tokens/s, Avg generation throughput: {generated:.1f} tokens/s, Running: "
                f"{int(generated > 0)} reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%, Prefix cache hit rate: 0.0%"
            )
        last = generated
    return "\n".join(lines) + "\n"


def test_a_vllm_log_silent_while_idle_is_sampled_at_its_interval_and_one_with_lines_left_out_is_not(
    tmp_path, report_of
):
    """A request every five minutes for two hours: two lines each (the busy interval, then the one
    after it), the gaps between them idle time the writer does not log, not blindness. Cut after a
    request's first line, the paste holds as many idle gaps as busy ones."""
    sporadic = tmp_path / "sporadic"
    sporadic.mkdir()
    lines = _vllm_v1_stats_log(set(range(3, 720, 30)), 720).splitlines()
    (sporadic / "vllm.log").write_text("\n".join(lines[1:]) + "\n")
    dump = load_dump(str(sporadic))
    assert dump.median_interval("server") > 100  # the gaps alone say every few minutes
    assert dump.interval("server") == 10
    report = report_of(sporadic)
    assert report["facts"]["sampling.interval_s"]["value"] == 10
    assert "idle time" in report["facts"]["sampling.interval_s"]["source"]
    assert "coarse-sampling" not in {h["id"] for h in report["hypotheses"] if h["score"] >= 0.5}
    # A busy server's lines, every sixth kept: while it served each interval had its line
    thinned = tmp_path / "thinned"
    thinned.mkdir()
    busy = _vllm_v1_stats_log(set(range(1, 721)), 720).splitlines()
    (thinned / "vllm.log").write_text("\n".join(busy[::6]) + "\n")
    assert load_dump(str(thinned)).interval("server") == 60
    assert "coarse-sampling" in {h["id"] for h in report_of(thinned)["hypotheses"] if h["score"] >= 0.5}


def test_a_table_keeps_its_writers_cadence_only_where_every_file_that_fed_it_stated_one(tmp_path):
    lines = _vllm_v1_stats_log(set(range(3, 720, 30)), 720).splitlines()
    (tmp_path / "vllm.log").write_text("\n".join(lines[1:]) + "\n")
    assert load_dump(str(tmp_path)).cadences["server"].seconds == 10
    # Rows of another writer in the same table, whose gaps say nothing of the kind
    (tmp_path / "server.csv").write_text("ts,running\n" + "".join(f"{1e9 + 60 * i},1\n" for i in range(5)))
    dump = load_dump(str(tmp_path))
    assert "server" not in dump.cadences and dump.interval("server") == dump.median_interval("server")


def test_the_issue_case_vllm_log_with_ooms_smi_csv_and_a_scrape(tmp_path, report_of):
    (tmp_path / "vllm.log").write_text(VLLM_V1 + VLLM_LOG)
    (tmp_path / "nvidia-smi.csv").write_text(SMI_CSV)
    (tmp_path / "metrics.prom").write_text(SCRAPES)
    report = report_of(tmp_path)
    assert {e["importer"] for e in report["evidence"]["importers"]} == {
        "vllm-log",
        "nvidia-smi-csv",
        "prometheus-text",
    }
    assert report["hypotheses"][0]["id"] == "memory-fragmentation"
    assert report["hypotheses"][0]["score"] >= 0.5


@pytest.mark.skipif(not SAMPLES.is_dir(), reason="shared real samples are not present")
@pytest.mark.parametrize("folder", sorted(EXPECTED))
def test_every_real_sample_is_read_by_its_importer_or_rejected_as_a_look_alike(folder):
    for path in sorted((SAMPLES / folder).glob("*.txt")):
        importer = recognise(path.read_text(encoding="utf-8", errors="replace")[:65536])
        if (folder, path.name) in LOOK_ALIKES:
            assert importer is None, path.name
            continue
        assert importer is not None and importer.name in EXPECTED[folder], path.name
        result = importer.read(Source.from_path(path))
        assert (result.rows == 0) == ((folder, path.name) in NOTHING_TO_KEEP), path.name
        if folder == "pytorch_oom":
            ooms = result.tables["events"].query("kind == 'oom'")
            assert len(ooms) and ooms["oom_class"].notna().all(), path.name


def test_otlp_root_spans_become_requests_with_stage_columns(tmp_path):
    def span(span_id, parent, name, start_ms, end_ms, attributes=()):
        return {
            "traceId": "t1",
            "spanId": span_id,
            "parentSpanId": parent,
            "name": name,
            "startTimeUnixNano": str(int(start_ms * 1e6)),
            "endTimeUnixNano": str(int(end_ms * 1e6)),
            "attributes": [{"key": k, "value": v} for k, v in attributes],
        }

    spans = [
        span(
            "a",
            "",
            "POST /v1/completions",
            1_000,
            1_250,
            [
                ("gen_ai.usage.prompt_tokens", {"intValue": "812"}),
                ("gen_ai.latency.time_in_queue", {"doubleValue": 0.04}),
            ],
        ),
        span("b", "a", "tokenize", 1_000, 1_030),
        span("c", "a", "forward", 1_030, 1_240),
    ]
    (tmp_path / "traces.json").write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}))
    request = load_dump(str(tmp_path)).tables["requests"].iloc[0]
    assert request["latency_ms"] == 250 and request["input_len"] == 812
    assert (request["stage_tokenize_ms"], request["stage_forward_ms"], request["stage_queue_ms"]) == (
        30,
        210,
        40,
    )


def test_grafana_and_prometheus_exports_route_known_metrics_to_their_tables(tmp_path):
    (tmp_path / "grafana.csv").write_text(
        "Time;vllm:num_requests_waiting\n1466074220000;4\n1466074240000;6\n"
    )
    (tmp_path / "range.json").write_text(
        json.dumps(
            {
                "status": "success",
                "data": {
                    "resultType": "matrix",
                    "result": [
                        {
                            "metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": "1"},
                            "values": [[1466074220, "97"]],
                        }
                    ],
                },
            }
        )
    )
    dump = load_dump(str(tmp_path))
    assert list(dump.tables["server"]["queue_depth"]) == [4, 6]
    assert dump.tables["gpu"].iloc[0][["gpu", "util_pct"]].tolist() == [1, 97]


def test_tz_gives_the_zone_of_times_written_without_an_offset(tmp_path, report_of):
    (tmp_path / "vllm.log").write_text(VLLM_LOG)
    utc = load_dump(str(tmp_path)).tables["events"]["ts"].iloc[0]
    shanghai = load_dump(str(tmp_path), tz="Asia/Shanghai").tables["events"]["ts"].iloc[0]
    assert utc - shanghai == 8 * 3600
    (tmp_path / "smi.csv").write_text(SMI_CSV)
    report = report_of(tmp_path, "--tz", "Asia/Shanghai")
    assert any("read in Asia/Shanghai" in w for w in report["evidence"]["warnings"])


def test_an_unknown_zone_is_a_usage_error(run_cli, tmp_path):
    with pytest.raises(SystemExit) as stop:
        run_cli("file", tmp_path, "--tz", "Mars/Olympus")
    assert stop.value.code == 2


def test_jaeger_traces_become_requests(tmp_path):
    trace = {
        "data": [
            {
                "traceID": "t",
                "spans": [
                    {
                        "traceID": "t",
                        "spanID": "r",
                        "operationName": "infer",
                        "references": [],
                        "startTime": 1_700_000_000_000_000,
                        "duration": 120_000,
                        "tags": [{"key": "error", "value": True}],
                    },
                    {
                        "traceID": "t",
                        "spanID": "c",
                        "operationName": "forward",
                        "startTime": 1_700_000_000_010_000,
                        "duration": 100_000,
                        "references": [{"refType": "CHILD_OF", "spanID": "r"}],
                        "tags": [],
                    },
                ],
            }
        ]
    }
    (tmp_path / "jaeger.json").write_text(json.dumps(trace))
    request = load_dump(str(tmp_path)).tables["requests"].iloc[0]
    assert (request["latency_ms"], request["stage_forward_ms"], request["status"]) == (120, 100, "error")


def test_a_torn_nvidia_smi_row_is_skipped_with_its_row_number(tmp_path):
    (tmp_path / "smi.csv").write_text(SMI_CSV + "2025/04/01 23:46:52.000, 0, NVIDIA A10G, 90 %\n")
    dump = load_dump(str(tmp_path))
    assert len(dump.tables["gpu"]) == 2
    assert any(
        "smi.csv: skipped 1 row with the wrong number of fields (data row 4)" in w for w in dump.warnings
    )


@pytest.mark.skipif(not SAMPLES.is_dir(), reason="shared real samples are not present")
def test_tritons_own_gpu_gauges_become_gpu_rows():
    from diagnose.importers.prometheus_text import PrometheusTextImporter

    gpu = PrometheusTextImporter().read(Source.from_path(SAMPLES / "triton_metrics" / "06.txt")).tables["gpu"]
    assert list(gpu["util_pct"]) == [pytest.approx(12.0)] and list(gpu["gpu"]) == [0]
    assert gpu["gpu_uuid"].iloc[0] == "GPU-d4d0dbb0-037e-652e-6df4-a742b597738c"


def test_a_request_log_under_any_name_is_read_by_what_its_rows_carry(tmp_path):
    rows = [{"ts": 1_780_000_000 + i, "id": f"r{i}", "latency_ms": 40.0 + i} for i in range(30)]
    (tmp_path / "service-requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "access.csv").write_text(
        "ts,stage_queue_ms,stage_forward_ms\n" + "".join(f"{1_780_000_100 + i},{i},20\n" for i in range(10))
    )
    (tmp_path / "events-of-mine.jsonl").write_text('{"ts": 1780000000, "what": "deploy"}\n')  # no latency
    dump = load_dump(str(tmp_path))
    read = {i["file"]: (i["importer"], i["rows"]) for i in dump.importers}
    assert read == {"service-requests.jsonl": ("request-log", 30), "access.csv": ("request-log", 10)}
    assert len(dump.tables["requests"]) == 40 and "events-of-mine.jsonl" in dump.not_used


def test_an_importer_that_leaves_out_reading_cannot_be_made():
    from diagnose.importers import Importer

    class OnlyRecognises(Importer):
        name = "half"

        def recognise(self, head: str) -> bool:
            return True

    with pytest.raises(TypeError, match="abstract"):
        OnlyRecognises()
