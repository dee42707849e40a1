"""Real lines of the field samples are found as the statements their writers' source says they are.

Each pair is a line of ``../shared/data/real-samples`` and the catalogue's statement for it, found by
the people who mined the writers' source (statements/README.md). A line that holds two statements (an
OOM inside a TGI error, an Xid 94 in the driver's Xid line) is the one that accounts for more of it.
"""

from __future__ import annotations

import pytest

from diagnose.statements import builtin_finder
from tests.conftest import SHARED_DATA

REAL = SHARED_DATA / "real-samples"
pytestmark = pytest.mark.skipif(not REAL.is_dir(), reason="../shared/data/real-samples is not here")

LINES = [
    ("field-2026-12-b/enginelog/15_lmeval_tqdm_glued_vllm_preemption_warning.log:8", "vllm-v0-preempted-by"),
    ("field-2026-12/oom/48.log:1", "vllm-v1-oom-warming-up-sampler"),
    ("field-2026-12/vllm/12.log:1", "vllm-v1-gpu-blocks"),
    ("field-2026-12/vllm/12.log:2", "vllm-max-concurrency"),
    ("field-2026-12/vllm/12.log:3", "vllm-v1-gpu-kv-cache-size"),
    ("field-2026-12/vllm/11.log:2", "vllm-v0-engine-iteration-timed-out"),
    ("field-2026-12/vllm/11.log:3", "vllm-v0-engine-background-task-failed"),
    ("field-2026-12/vllm/14.log:4", "vllm-v0-engine-iteration-timed-out"),
    ("field-2026-12/vllm/09.log:1", "vllm-v1-available-kv-cache-memory"),
    ("field-2026-12/vllm/08.log:2", "vllm-v0-preempted-by"),
    ("formats/vllm_log/05.txt:6", "vllm-v0-preempted-by"),
    ("formats/vllm_log/06.txt:2", "vllm-v0-preempted-by"),
    ("formats/vllm_log/12.txt:5", "vllm-v0-mq-engine-already-dead"),
    ("formats/vllm_log/14.txt:3", "vllm-v1-enginecore-failed-to-start"),
    ("formats/vllm_log/13.txt:6", "vllm-max-seq-len-larger-than-kv-cache"),
    ("field-2026-12-b/enginelog/13_tgi_launcher_shard_waiting_4ranks.log:1", "tgi-waiting-for-shard"),
    ("field-2026-12/tgi/02.log:1", "tgi-server-started"),
    ("field-2026-12/tgi/02.log:7", "tgi-shard-ready"),
    ("field-2026-12/tgi/03.log:1", "tgi-method-encountered-error"),
    ("field-2026-12/oom/42.log:4", "tgi-shard-failed-to-start"),
    ("formats/pytorch_oom/21.txt:2", "pytorch-oom-malloc-async"),
    ("formats/pytorch_oom/21.txt:4", "tgi-webserver-crashed"),
    ("formats/pytorch_oom/21.txt:6", "tgi-shard-terminated-rank"),
    (
        "field-2026-12-b/enginelog/10_triton_trtllm_ifb_stats_json_wrapped.log:2",
        "triton-trtllm-stats-max-kv-cache-blocks",
    ),
    (
        "field-2026-12-b/xid/10_journal_llama_swap_app_lines_xid31_mmu_fault_segfault.log:5",
        "llama-cpp-ggml-cuda-error",
    ),
    ("field-2026-12/triton/03.log:12", "triton-successfully-loaded-version"),
    ("field-2026-12/triton/01.log:16", "triton-initializing-triton-inference-server"),
    ("field-2026-12/oom/11.log:2", "pytorch-oom-cached"),
    ("field-2026-12-b/oom/01_torch10_cached_chained_traceback.log:5", "pytorch-oom-cached"),
    ("field-2026-12/oom/05.log:1", "pytorch-oom-reserved"),
    ("field-2026-12-b/oom/04_torch113_quoted_in_chinese.md:2", "pytorch-oom-reserved"),
    ("field-2026-12/oom/42.log:1", "pytorch-oom-reserved-allowed"),
    ("field-2026-12/oom/06.log:3", "pytorch-oom-capacty-typo"),
    ("field-2026-12/oom/38.log:1", "pytorch-oom-capacity"),
    ("field-2026-12-b/oom/05_vllm_ray_worker_ip_prefix.log:2", "pytorch-oom-capacity"),
    ("field-2026-12-b/oom/30_tgi_missing_gpu_index_in_prose.txt:3", "pytorch-oom-other-process"),
    ("field-2026-12/oom/17.log:1", "pytorch-oom-malloc-async"),
    ("field-2026-12/oom/28.log:1", "pytorch-cuda-error-oom"),
    ("field-2026-12-b/oom/19_cublas_alloc_failed_cpp_frames.log:1", "pytorch-cublas-alloc-failed"),
    (
        "field-2026-12-b/xid/10_journal_llama_swap_app_lines_xid31_mmu_fault_segfault.log:4",
        "pytorch-cuda-illegal-address",
    ),
    ("field-2026-12-b/xid/01_syslog_uptime_xid48_dbe_xid64_rminitadapter.log:4", "nvidia-driver-xid"),
    ("field-2026-12-b/xid/05_old_xid13_gpc_tpc_no_sm_inline_backtick.txt:1", "nvidia-driver-xid-nopid"),
    (
        "field-2026-12-b/xid/06_dmesg_T_grep_xid79_fallen_off_bus_with_prompts.log:8",
        "nvidia-driver-fallen-off-bus-xid79",
    ),
    (
        "field-2026-12-b/xid/01_syslog_uptime_xid48_dbe_xid64_rminitadapter.log:2",
        "nvidia-driver-rminitadapter-failed",
    ),
    ("field-2026-12/xid/06_gsp_timeout_no_xid.log:10", "nvidia-driver-gsp-timeout-banner"),
    ("field-2026-12/xid/06_gsp_timeout_no_xid.log:3", "nvidia-driver-gsp-heartbeat-timeout"),
    ("field-2026-12/xid/07_sichek_reset_required_no_xid.log:2", "nvidia-driver-assert-reset-required"),
    ("field-2026-12/xid/01_dmesg_T_xid43_31_94_pt_main_thread.log:12", "nvidia-driver-xid"),
    ("field-2026-12-b/oom/12_jax_bufferassignment_6MiB.log:5", "jax-xla-oom-allocate-bytes"),
    (
        "field-2026-12-b/oom/13_jax_failed_to_allocate_request_ordinal.log:16",
        "jax-xla-failed-to-allocate-request",
    ),
    ("field-2026-12-b/oom/11_tf1_two_root_errors_notebook.log:7", "tensorflow-oom-allocating-tensor"),
    ("field-2026-12-b/oom/09_tf_mpi_rank_prefix_cuda_driver.log:1", "tensorflow-cuda-alloc-failed"),
    (
        "field-2026-12-b/oom/20_tf_cublas_not_initialized_then_cuda_driver_oom.log:2",
        "tensorflow-cublas-handle-failed",
    ),
]


@pytest.mark.parametrize(("where", "statement"), LINES, ids=[w for w, _ in LINES])
def test_a_real_line_is_found_as_its_writers_statement(where, statement):
    path, line = where.rsplit(":", 1)
    text = (REAL / path).read_text(encoding="utf-8", errors="replace")
    found = {f.line: f.statement.id for f in builtin_finder().find(text)}
    assert found.get(int(line)) == statement, found
