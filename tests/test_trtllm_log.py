"""TensorRT-LLM's per-iteration log read in each generation its executor wrote (diagnose/importers/trtllm_log.py).

The lines follow the f-strings of tensorrt_llm/_torch/pyexecutor/py_executor.py's releases, with figures of
our own.
"""

from __future__ import annotations

import pytest

from diagnose.importers import recognise
from diagnose.importers.base import Source
from diagnose.importers.trtllm_log import TrtllmIterLogImporter

STATES = "states = {{'num_ctx_requests': {ctx}, 'num_ctx_tokens': {ctx_tokens}, 'num_generation_tokens': {gen}}}"


def _line(generation: int, it: int, second: int, scheduled: int, gen: int, ctx_tokens: int = 0, rank: int = 0) -> str:
    stamp = f"timestamp = 2025-08-07 02:28:{second:02d}"
    states = STATES.format(ctx=1 if ctx_tokens else 0, ctx_tokens=ctx_tokens, gen=gen)
    head = f"iter = {it}, global_rank = {rank}, rank = {rank}, "
    if generation == 1:
        return f"{head}currank_total_requests = 0/0, elapsed_time = 0.08s, {stamp}, {states}"
    if generation == 2:
        return f"{head}currank_total_requests = 0/0, elapsed_time = 0.08s, {stamp}, num_scheduled_requests: {scheduled}, {states}"
    if generation == 3:
        return (
            f"{head}currank_total_requests = 0/0, host_step_time = 82.3ms, prev_device_step_time = 80.1ms, {stamp}, "
            f"num_scheduled_requests: {scheduled}, {states}"
        )
    return (
        f"{head}num_scheduled_requests = {scheduled}, kv_cache_util = 0.412, currank_total_requests = 0/0, "
        f"host_step_time = 82.3ms, prev_device_step_time = N/A, {stamp}, {states}"
    )


def _server(text: str):
    imported = TrtllmIterLogImporter().read(Source("trtllm.log", text, 0.0))
    return imported.tables["server"], imported.warnings


@pytest.mark.parametrize("generation", [2, 3, 4])
def test_each_second_holds_its_iterations_tokens_and_the_most_requests_scheduled(generation):
    lines = [
        _line(generation, 5, 51, scheduled=1, gen=0, ctx_tokens=4096),
        _line(generation, 6, 52, scheduled=2, gen=1, ctx_tokens=4096),
        _line(generation, 7, 52, scheduled=3, gen=2),
        _line(generation, 8, 52, scheduled=3, gen=3),
    ]
    server, warnings = _server("\n".join(f"[08/07/2025-02:28:5x] [TRT-LLM] [I] {line}" for line in lines) + "\n")
    by_second = server.set_index("ts")
    first, second = 1_754_533_731.0, 1_754_533_732.0  # 2025-08-07 02:28:51 and :52, read as UTC
    assert list(by_second.index) == [first, second]
    assert by_second.loc[second, "running"] == 3 and by_second.loc[second, "tokens_per_s"] == 6
    assert by_second.loc[first, "prompt_tokens_per_s"] == 4096 and by_second.loc[second, "prompt_tokens_per_s"] == 4096
    if generation == 4:
        assert by_second.loc[second, "kv_cache_usage_pct"] == pytest.approx(41.2)
    assert any("no UTC offset" in w for w in warnings)


def test_the_first_generation_without_a_scheduled_count_still_gives_its_tokens():
    server, _ = _server("\n".join(_line(1, i, 51, scheduled=0, gen=4) for i in range(3)) + "\n")
    assert list(server["tokens_per_s"]) == [12] and "running" not in server.columns


def test_only_the_lowest_ranks_lines_count_and_the_others_are_said():
    lines = [_line(3, 5, 51, 2, 2, rank=r) for r in (1, 0, 1)] + [_line(3, 6, 51, 2, 2, rank=0)]
    server, warnings = _server("\n".join(lines) + "\n")
    assert list(server["tokens_per_s"]) == [4]
    assert any("read global rank 0's, left out 1 other rank" in w for w in warnings)


def test_a_log_with_no_iteration_lines_is_not_claimed():
    text = "[TRT-LLM] [I] Loaded engine size: 6024 MiB\n[TRT-LLM] [I] Executor started\n" * 3
    importer = recognise(text)
    assert importer is None or importer.name != "tensorrt-llm-iter-log"
    assert recognise("\n".join(_line(3, i, 51, 1, 1) for i in range(3))).name == "tensorrt-llm-iter-log"
