"""llama.cpp's server log read as its print_timings writes each generation (diagnose/importers/llamacpp_log.py).

The lines below follow the format strings of the server's source (vendored in llama-cpp-python's sdists),
with figures of our own; the newest generation's layout is also what the testbed's built server wrote.
"""

from __future__ import annotations

import pytest

from diagnose.importers import recognise
from diagnose.importers.base import Source
from diagnose.importers.llamacpp_log import LlamaCppLogImporter

# 0.3.36 on: one SLT_INF a line, each behind its slot's head; --log-timestamps gives the relative clock.
NEWEST = """\
0.01.002.000 I srv  update_slots: all slots are idle
0.01.500.100 I slot print_timing: id  0 | task 7 | prompt eval time =     400.00 ms /   800 tokens (    0.50 ms per token,  2000.00 tokens per second)
0.01.500.300 I slot print_timing: id  1 | task 9 | prompt eval time =      20.00 ms /     4 tokens (    5.00 ms per token,   200.00 tokens per second)
0.01.500.106 I slot print_timing: id  0 | task 7 |        eval time =    1000.00 ms /   100 tokens (   10.00 ms per token,   100.00 tokens per second)
0.01.500.107 I slot print_timing: id  0 | task 7 |       total time =    1400.00 ms /   900 tokens
0.01.500.108 I slot print_timing: id  0 | task 7 |    graphs reused =         99
0.03.500.306 I slot print_timing: id  1 | task 9 |        eval time =     500.00 ms /    50 tokens (   10.00 ms per token,   100.00 tokens per second)
0.03.500.307 I slot print_timing: id  1 | task 9 |       total time =     520.00 ms /    54 tokens
"""

# 0.3.0 to 0.3.30: one SLT_INF whose message runs on over continuation lines; here behind a container's
# prefix and stamp.
CONTINUED = """\
llama  | 2025-03-01T10:00:05.000Z slot      release: id  0 | task 3 | stop processing: n_past = 60, truncated = 0
llama  | 2025-03-01T10:00:05.000Z slot print_timing: id  0 | task 3 |
llama  | prompt eval time =     250.00 ms /    50 tokens (    5.00 ms per token,   200.00 tokens per second)
llama  |        eval time =    1000.00 ms /    10 tokens (  100.00 ms per token,    10.00 tokens per second)
llama  |       total time =    1250.00 ms /    60 tokens
"""

# 2024: LOG_INFO as JSON, the ids and the Unix time in each record.
JSON_2024 = """\
{"tid":"1","timestamp":1717000000,"level":"INFO","function":"print_timings","line":313,"msg":"prompt eval time     =      50.00 ms /    10 tokens (    5.00 ms per token,   200.00 tokens per second)","id_slot":2,"id_task":11,"t_prompt_processing":50.0,"n_prompt_tokens_processed":10,"t_token":5.0,"n_tokens_second":200.0}
{"tid":"1","timestamp":1717000000,"level":"INFO","function":"print_timings","line":327,"msg":"generation eval time =     950.00 ms /    19 runs   (   50.00 ms per token,    20.00 tokens per second)","id_slot":2,"id_task":11,"t_token_generation":950.0,"n_decoded":19,"t_token":50.0,"n_tokens_second":20.0}
{"tid":"1","timestamp":1717000000,"level":"INFO","function":"print_timings","line":337,"msg":"          total time =    1000.00 ms","id_slot":2,"id_task":11,"t_prompt_processing":50.0,"t_token_generation":950.0,"t_total":1000.0}
"""

# To early 2024: LOG_TEE lines with no ids; llama-cpp-python and ollama print the library's own
# llama_print_timings, whose load and sample lines are not the request's.
OLDEST = """\
llama_print_timings:        load time =    1200.00 ms
llama_print_timings:      sample time =       3.00 ms /    30 runs   (    0.10 ms per token, 10000.00 tokens per second)
llama_print_timings: prompt eval time =     300.00 ms /    30 tokens (   10.00 ms per token,   100.00 tokens per second)
llama_print_timings:        eval time =    2900.00 ms /    29 runs   (  100.00 ms per token,    10.00 tokens per second)
llama_print_timings:       total time =    3300.00 ms
"""


def _requests(text: str, mtime: float = 1_800_000_000.0):
    imported = LlamaCppLogImporter().read(Source("server.log", text, mtime))
    return imported.tables["requests"], imported.warnings


def test_each_request_is_its_prefill_and_its_generation_whichever_slot_its_lines_interleave_with():
    rows, warnings = _requests(NEWEST)
    first = rows.set_index("id").loc["7"]
    assert first["worker"] == "slot 0" and first["latency_ms"] == 1400.0
    assert (first["stage_prefill_ms"], first["stage_decode_ms"]) == (400.0, 1000.0)
    assert (first["input_len"], first["output_len"], first["tpot_ms"]) == (800, 100, 10.0)
    other = rows.set_index("id").loc["9"]
    assert other["worker"] == "slot 1" and other["output_len"] == 50
    # the server's clock since its start, the last line at the file's time; arrival = end - total
    assert other["ts"] == pytest.approx(1_800_000_000.0 - 0.52)
    assert first["ts"] == pytest.approx(1_800_000_000.0 - (3.500307 - 1.500107) - 1.4)
    assert any("server's clock since its start" in w for w in warnings)


def test_a_message_on_continuation_lines_is_its_slots_and_a_containers_stamp_dates_it():
    rows, warnings = _requests(CONTINUED)
    (row,) = rows.to_dict("records")
    assert row["id"] == "3" and row["latency_ms"] == 1250.0 and row["tpot_ms"] == 100.0
    assert row["ts"] == pytest.approx(1_740_823_205.0 - 1.25)  # 2025-03-01T10:00:05Z less its total
    assert not warnings


def test_the_newest_json_lines_take_the_servers_clock():
    lines = [line.split(" I ", 1) for line in NEWEST.splitlines()]
    jsonl = "".join(
        f'{{"type":"log","time":{round(float(clock.replace(".", "", 1).replace(".", "")))},"level":"info","msg":"{msg}"}}\n'
        for clock, msg in lines
    )
    rows, _ = _requests(jsonl)
    assert list(rows.sort_values("id")["latency_ms"]) == [1400.0, 520.0]
    assert rows.set_index("id").loc["9", "ts"] == pytest.approx(1_800_000_000.0 - 0.52)


def test_the_2024_json_records_give_their_ids_and_unix_time():
    rows, _ = _requests(JSON_2024)
    (row,) = rows.to_dict("records")
    assert (row["id"], row["worker"], row["output_len"]) == ("11", "slot 2", 19)
    assert row["ts"] == pytest.approx(1_717_000_000 - 1.0)


def test_the_oldest_lines_and_the_librarys_own_give_the_request_not_its_load_or_sampling():
    rows, warnings = _requests(OLDEST)
    (row,) = rows.to_dict("records")
    assert (row["stage_prefill_ms"], row["stage_decode_ms"], row["latency_ms"]) == (300.0, 2900.0, 3300.0)
    assert row["id"] is None and any("no time of its own" in w for w in warnings)


def test_a_block_cut_before_its_total_is_no_request_and_other_engines_logs_are_not_claimed():
    cut = NEWEST.split("0.03.500.307")[0]
    rows, _ = _requests(cut)
    assert list(rows["id"]) == ["7"]
    vllm = "INFO 07-14 21:33:52 [loggers.py:273] Engine 000: Avg prompt throughput: 1.0 tokens/s, Running: 1 reqs\n"
    importer = recognise(vllm * 3)
    assert importer is None or importer.name != "llama-cpp-log"
    assert recognise(NEWEST).name == "llama-cpp-log"


def test_a_pasted_server_log_is_analysed_with_its_requests(tmp_path, report_of):
    (tmp_path / "llama-server.log").write_text(NEWEST * 6, encoding="utf-8")
    report = report_of(tmp_path)
    assert {"file": "llama-server.log", "importer": "llama-cpp-log", "rows": 12} in report["evidence"]["importers"]
