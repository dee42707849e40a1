"""Damage a format's grammar undoes, or refuses: never a figure read wrong.

Each case is built from the format as its writer documents it and damaged the way
``benchmarks/bench_damage.py`` found the real samples misread: rows glued on one
line, a last line cut, a record start hidden in a wrap's tail, a paste that starts
inside a report. The real samples under every damage are in ``tests/test_mend.py``.
"""

from __future__ import annotations

import json

from diagnose.engines.oom import UNKNOWN, classify_oom, parse_oom_message
from diagnose.importers import Source, mend, recognise

MTIME = 1_764_000_000.0


def _read(text: str, name: str = "pasted.txt"):
    mended = mend(text)
    importer = recognise(mended.text)
    assert importer is not None, text[:200]
    return importer.read(Source(name, mended.text, MTIME, mended.undone, mended.prefixes))


PMON = (
    "# gpu         pid   type     sm    mem    enc    dec    command\n"
    "# Idx           #    C/G      %      %      %      %    name\n"
)


def test_pmon_rows_glued_on_one_line_are_two_rows_and_a_name_keeps_its_spaces():
    rows = [
        "    0      22010     C    98    56     -     -   python3",
        "    0       4680   C+G     -      -     -     -   NVIDIA Share.exe",
    ]
    glued = PMON + rows[0] + rows[1] + "\n"
    frame = _read(glued).tables["gpu_processes"]
    assert list(frame["pid"]) == [22010, 4680]
    assert list(frame["name"]) == ["python3", "NVIDIA Share.exe"]
    assert list(frame["sm_pct"].fillna(-1)) == [98, -1]


def test_a_pmon_name_cut_by_the_paste_is_the_pids_name_elsewhere_or_none():
    rows = "\n".join(f"    0      {pid}     C    98    56     -     -   python3" for pid in (1, 2, 1))
    frame = _read(PMON + rows[:-3]).tables["gpu_processes"]  # "pyth": the text ends on it, no line end
    assert list(frame["name"]) == ["python3", "python3", "python3"]
    frame = _read(PMON + rows.replace("   python3", "   worker_a")[:-3]).tables["gpu_processes"]
    assert frame["name"].iloc[-1] == "worker_a"  # pid 1 says its name in full elsewhere
    lone = PMON + "    0      7     C    98    56     -     -   tritonserver"[:-4]
    assert _read(lone).tables["gpu_processes"]["name"].isna().all()  # nothing says what it was
    assert _read(lone + "\n").tables["gpu_processes"]["name"].iloc[0] == "tritonse"  # a line end: whole


def test_a_dmon_figure_on_a_cut_last_line_is_left_out():
    dmon = "# gpu    pwr  gtemp     sm    mem   pclk\n# Idx      W      C      %      %    MHz\n"
    rows = "\n".join(f"    0     {60 + i}     40     {10 + i}      5   1980" for i in range(3))
    frame = _read(dmon + rows[:-2]).tables["gpu"]  # "1980" cut to "19"
    assert frame["sm_clock_mhz"].iloc[:2].tolist() == [1980, 1980]
    assert frame["sm_clock_mhz"].isna().iloc[-1] and frame["util_pct"].iloc[-1] == 12


def test_lines_glued_behind_their_process_tags_are_split_at_the_tag():
    tag = "(EngineCore_0 pid=91) "
    stats = [
        f"INFO 05-19 10:13:0{s} [loggers.py:271] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
        f"Avg generation throughput: 41.{s} tokens/s, Running: 3 reqs, Waiting: 0 reqs, "
        "GPU KV cache usage: 12.5%, Prefix cache hit rate: 0.0%"
        for s in range(4)
    ]
    tagged = [tag + line for line in stats]
    mended = mend("\n".join([tagged[0], tagged[1] + tagged[2], tagged[3]]))
    assert mended.text == "\n".join(stats)
    # a tag the paste's own lines do not start with is text, not a line's start
    said = "INFO 05-19 10:13:00 [core.py:1] killed (Worker_7 pid=3) after 5 s"
    assert mend("\n".join([*tagged, tag + said])).text.endswith(said)


def test_a_memory_fraction_oom_cut_before_its_free_memory_has_no_class():
    whole = (
        "torch.OutOfMemoryError: Allocation on device 0 would exceed allowed memory. (out of memory)\n"
        "Currently allocated     : 5.96 GiB\nRequested               : 12.50 MiB\n"
        "Device limit            : 12.00 GiB\nFree (according to CUDA): 5.00 GiB\n"
        "PyTorch limit (set by user-supplied memory fraction)\n                        : 17179869184.00 GiB"
    )
    assert classify_oom(parse_oom_message(whole)).startswith("anomalous")
    cut = whole[: whole.index("5.00 GiB") + 1]  # "Free (according to CUDA): 5"
    oom = parse_oom_message(cut)
    assert oom.cut and classify_oom(oom) == UNKNOWN
    without_limit = whole[: whole.index("PyTorch limit") + 14]  # the limit cut: free memory still says
    assert classify_oom(parse_oom_message(without_limit)).startswith("anomalous")


QUERY = """==============NVSMI LOG==============

Timestamp                                 : Wed Jul 31 11:22:39 2024
Driver Version                            : 535.183.01

Attached GPUs                             : 2
GPU 00000000:19:00.0
    Product Name                          : NVIDIA H100 80GB HBM3
    Minor Number                          : 0
    FB Memory Usage
        Total                             : 81559 MiB
        Used                              : 0 MiB
    BAR1 Memory Usage
        Total                             : 131072 MiB
    Clocks Event Reasons
        Idle                              : Active
        HW Slowdown                       : Not Active
    Temperature
        GPU Current Temp                  : 29 C
GPU 00000000:3B:00.0
    Product Name                          : NVIDIA H100 80GB HBM3
    Minor Number                          : 1
    FB Memory Usage
        Total                             : 81559 MiB
        Used                              : 71237 MiB
    Clocks Event Reasons
        Idle                              : Not Active
    Temperature
        GPU Current Temp                  : 41 C
"""


def test_nvidia_smi_q_lines_glued_together_are_split_at_the_next_key():
    lines = QUERY.split("\n")
    glued = [line for line in lines]
    at = lines.index("    BAR1 Memory Usage")
    glued[at - 1] += glued.pop(at)  # "Used : 0 MiB    BAR1 Memory Usage": BAR1's Total is not the FB's
    at = glued.index("    Temperature")
    glued[at] += glued.pop(at + 1)  # "Temperature        GPU Current Temp : 29 C"
    frame = _read("\n".join(glued)).tables["gpu"]
    assert frame["mem_total_bytes"].tolist() == [81559 * 2**20] * 2
    assert frame["temp_c"].tolist() == [29, 41]


def test_a_q_paste_that_starts_inside_the_report_numbers_gpus_by_their_minor_number():
    second = QUERY[QUERY.index("GPU 00000000:3B:00.0") :]
    result = _read("        Used                              : 12 MiB\n" + second)
    assert result.tables["gpu"]["gpu"].tolist() == [1]
    assert any("Minor Number" in warning for warning in result.warnings)


def test_clock_reasons_are_none_only_where_they_were_read():
    frame = _read(QUERY).tables["gpu"]
    assert frame["throttle_reasons"].tolist() == ["gpu_idle", "none"]
    without = "\n".join(line for line in QUERY.split("\n") if "Active" not in line)
    assert "throttle_reasons" not in _read(without).tables["gpu"].columns


def test_a_wrapped_tail_at_the_left_margin_is_no_section_of_the_gpu():
    wrapped = QUERY.replace(
        "    Product Name                          : NVIDIA H100 80GB HBM3\n    Minor Number                          : 0",
        "    Product Name                          : NVIDIA H100 80GB\nHBM3\n    Minor Number                          : 0",
    )
    frame = _read(wrapped).tables["gpu"]
    assert frame["temp_c"].tolist() == [29, 41]  # the figures after "HBM3" still read in their sections


COMPUTE_APPS = [
    "gpu_uuid, pid, process_name, used_gpu_memory [MiB]",
    "GPU-a44622e3-2296-6285-0a86-84d0f6c67900, 1328667, /usr/local/bin/python3.10, 130004 MiB",
    "GPU-4e9e74b7-4977-f04d-3af3-ccfe5f570e90, 1425258, python3, 105842 MiB",
    "GPU-4f31bb83-f8dc-d0af-029e-bc4356e6afeb, 1328668, /usr/local/bin/python3.10, 130044 MiB",
    "GPU-cb449822-5571-be90-8303-e7558da3ea66, 1425259, python3, 105842 MiB",
]


def test_csv_records_glued_on_one_line_are_split_where_a_record_starts():
    lines = list(COMPUTE_APPS)
    lines[1] += lines.pop(2)  # "... 130004 MiBGPU-4e9e..."
    assert mend("\n".join(lines)).text == "\n".join(COMPUTE_APPS)
    indexed = [
        "index, uuid, memory.used [MiB]",
        *(f"{i}, GPU-{i}a44622e3-2296-6285, {100 * i} MiB" for i in range(4)),
    ]
    lines = list(indexed)
    lines[2] += lines.pop(3)  # "... 100 MiB2, GPU-2a446...": an index starts the record
    assert mend("\n".join(lines)).text == "\n".join(indexed)


def test_whole_csv_records_of_the_longest_width_are_not_joined_and_wrapped_tails_are():
    table = "\n".join([*COMPUTE_APPS, "", *COMPUTE_APPS])  # the longest rows, each followed by a row
    assert mend(table).text == table
    wrapped = "\n".join(line[i : i + 80] for line in COMPUTE_APPS for i in range(0, len(line), 80))
    assert mend(wrapped).text == "\n".join(COMPUTE_APPS)  # "..., 13" + "0004 MiB": a tail of no fields


def test_markdown_escapes_are_undone_after_the_wrap_they_widened_is_rejoined():
    log = "\n".join(  # escapes in the first 90 characters: one a line more
        f"WARNING 05-19 10:13:0{s} [scheduler.py:1057] Sequence group cmpl{'_x' * (s + 1)} is preempted "
        "by PreemptionMode.RECOMPUTE mode because there is not enough KV cache space."
        for s in range(4)
    )
    escaped = log.replace("_", "\\_")
    wrapped = "\n".join(line[i : i + 90] for line in escaped.split("\n") for i in range(0, len(line), 90))
    assert mend(wrapped).text == log


def test_a_wrap_tail_that_looks_like_a_prometheus_sample_starts_no_record_outside_a_scrape():
    start = (
        "2024-11-15T12:02:03,470068+00:00 NVRM: Xid (PCI:0000:19:00): 48, pid='<unknown>', "
        "name=<unknown>, An uncorrectable double bit error (DBE) has been detected on GPU at "
    )
    records = [
        (start + "x" * 80)[:238] + "subpartition 1.",  # wrapped at 80: "... su" / "bpartition 1."
        "2024-11-15T12:02:03,498753+00:00 NVRM: Xid (PCI:0000:19:00): 63, pid='<unknown>', "
        "name=<unknown>, Row Remapper: New row (0x00000012bac1c3e0) marked for remapping, reset gpu.",
    ]
    wrapped = "\n".join(line[i : i + 80] for line in records for i in range(0, len(line), 80))
    assert "\nbpartition 1.\n" in wrapped
    assert mend(wrapped).text == "\n".join(records)


def test_dmesg_lines_with_a_ctime_stamp_glued_together_are_split():
    lines = [
        "[Sun Feb 23 16:24:36 2025] NVRM: Rate limiting GSP RPC error prints for GPU at PCI:0000:9b:00",
        "[Sun Feb 23 16:27:12 2025] NVRM: Xid (PCI:0000:9b:00): 119, pid=1263500, name=cache_mgr_main, "
        "Timeout after 6s of waiting for RPC response from GPU4 GSP!",
    ]
    assert mend(lines[0] + lines[1]).text == "\n".join(lines)


def test_a_cut_response_keeps_each_series_labels_and_a_broken_line_is_joined():
    document = {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [
                {"metric": {"__name__": "up", "job": job}, "values": [[1435781430.781, "1"]]}
                for job in ("prometheus", "node")
            ],
        },
    }
    text = json.dumps(document)
    cut = _read(text[: text.rindex("]]") - 3]).tables["series"]  # the last point cut
    assert cut["series"].tolist() == ["up{job=prometheus}"]
    broken = json.dumps(document).replace('"1"]]}, {', '"1"]]}, \n{')
    assert sorted(_read(broken).tables["series"]["series"]) == ["up{job=node}", "up{job=prometheus}"]


def test_a_json_line_a_paste_broke_in_two_is_one_document_again():
    span = {
        "traceId": "d5cedbb6b980918d6f63fbece1de512f",
        "spanId": "d7fb358e2f168f8c",
        "name": "POST /v1/completions",
        "kind": 2,
        "startTimeUnixNano": "1727329890863193500",
        "endTimeUnixNano": "1727329891056280600",
        "status": {},
    }
    line = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]})
    cut = line.index("TimeUn") + 4
    pasted = "spans the collector exported:\n" + line[:cut] + "\n" + line[cut:] + "\n"
    frame = _read(pasted, "spans.jsonl").tables["requests"]
    assert frame["latency_ms"].round(1).tolist() == [193.1]


def test_a_grafana_row_cut_before_its_separator_is_left_out():
    rows = ["Time;Int32polled.distinct;", "1466074220000;852888298;", "1466074200000;507504844;"]
    mended = mend("\n".join(rows)[:-2])  # "...;5075048" with no line end
    assert mended.text == "\n".join(rows[:2])
    assert mend("\n".join(rows)).text == "\n".join(rows)  # whole: its separator ends it
