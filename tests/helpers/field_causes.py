"""The cause each real field sample shows plainly, read by a person: what benchmarks/bench_field.py
counts as named when it comes first and likely.

Gathered from the tables the tests already keep (the engine logs' causes in
tests/test_engine_findings.py, the OOM verdicts in tests/test_oom_verdicts.py: a fragmentation verdict
is the memory-fragmentation cause) and, for the third batch, read here. A file whose cause is not
plain from the file alone (an OOM that only says the model did not fit, stats of a busy engine) is
not listed: no cause is the right answer there.
"""

from __future__ import annotations

from tests.test_engine_findings import SHOWN
from tests.test_oom_verdicts import FRAG, VERDICTS

_OOM_FOLDERS = {"oom": "field-2026-12/oom", "pytorch_oom": "formats/pytorch_oom"}

THIRD_BATCH = {
    # vLLM V0's own warning, glued to a tqdm bar: "preempted by PreemptionMode.RECOMPUTE mode because
    # there is not enough KV cache space"
    "field-2026-12-b/enginelog/15_lmeval_tqdm_glued_vllm_preemption_warning.log": "kv-cache-pressure",
    # 1 request running, 0 tokens/s in every stats line for minutes
    "field-2026-12-b/enginelog/16_vllm_v0_debug_level_stats_with_metrics_scrapes.log": "engine-stall",
    # Memory held by the allocator, free in its cache, more than the request that failed:
    # HIP: 6.22 GiB free and 7.10 GiB reserved but unallocated for a 6.64 GiB request
    "field-2026-12-b/oom/16_hip_comfyui_fragmentation.log": "memory-fragmentation",
    # torch <= 1.3's "cached" (reserved less allocated): 1.67 GiB for a 468 MiB request
    "field-2026-12-b/oom/03_torch1x_cached_8gpu_prose.txt": "memory-fragmentation",
    # reserved but unallocated 2.88 GiB for a 2.81 GiB request
    "field-2026-12-b/oom/04_torch113_quoted_in_chinese.md": "memory-fragmentation",
    # reserved but unallocated 2.57 GiB for a 388 MiB request
    "field-2026-12-b/oom/23_fsdp_trl_then_rank0_traceback.log": "memory-fragmentation",
    # torch <= 1.3's "cached" (reserved less allocated): 3.32 GiB for a 1.48 GiB request
    "field-2026-12-b/oom/02_torch1x_cached_backticks_prose.txt": "memory-fragmentation",
    # reserved but unallocated 8.65 GiB for an 8.06 GiB request (the first of the two pastes)
    "field-2026-12-b/oom/24_litgpt_fsdp_1gpu_and_2gpu.txt": "memory-fragmentation",
}

CAUSES: dict[str, str] = {
    **SHOWN,
    **{
        f"{_OOM_FOLDERS[folder]}/{name}": "memory-fragmentation"
        for (folder, name), verdicts in VERDICTS.items()
        if verdicts == {FRAG}
    },
    **THIRD_BATCH,
}
