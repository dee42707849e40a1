"""What each real field sample must yield: the importer that reads it, or a clean refusal.

Two batches under ``../shared/data/real-samples/``: ``formats`` (a folder per format) and
``field-2026-12`` (a folder per kind of evidence). A sample yields rows through one of its folder's
importers unless it is declared here: a look-alike or a form no importer reads yet (refused: "no
tables found"), or a file recognised with nothing the dump has a column for (refused: "no rows came
of it"). Removing the reading of a format makes its samples fail, in tests/test_importers.py (the
importer alone) and tests/test_real_samples_whole.py (the whole analysis).
"""

from __future__ import annotations

from pathlib import Path

from tests.conftest import SHARED_DATA

REAL = SHARED_DATA / "real-samples"
SAMPLES = REAL / "formats"
FIELD = REAL / "field-2026-12"

EXPECTED = {
    # an OOM inside a vLLM or TGI log is read with the rest of the log
    "pytorch_oom": ("pytorch-oom", "vllm-log", "tgi-log"),
    "xid_dmesg": ("kernel-xid",),
    "nvidia_smi_query_gpu": ("nvidia-smi-csv",),
    "nvidia_smi_compute_apps": ("nvidia-smi-compute-apps",),
    "vllm_log": ("vllm-log",),
    "vllm_metrics": ("prometheus-text",),
    "triton_metrics": ("prometheus-text",),
    "tgi_metrics": ("prometheus-text",),
    "dcgm_exporter_metrics": ("prometheus-text",),
    "nvidia_smi_dmon": ("nvidia-smi-dmon",),
    "nvidia_smi_default": ("nvidia-smi-table",),
    "nvidia_smi_pmon": ("nvidia-smi-pmon",),
    "pytorch_memory_summary": ("pytorch-memory",),
    "otlp_json_traces": ("otel-traces",),
    "prometheus_query_range": ("prometheus-api-json",),
    "grafana_csv": ("grafana-csv",),
}
# Real look-alikes that must be left unused, not misread: kernel logs with NVIDIA lines but no Xid,
# and a scrape of HELP/TYPE headers with no sample.
LOOK_ALIKES = {
    ("xid_dmesg", "13.txt"),
    ("xid_dmesg", "14.txt"),
    ("vllm_metrics", "05.txt"),
    ("otlp_json_traces", "03.txt"),
    ("otlp_json_traces", "04.txt"),  # Go stdouttrace JSON, collector text dump
}
# Recognised and read, with nothing the dump has a column for: a compute-apps header with no process
# running, dcgm encoder/decoder fields only, a query_range answer with no series.
NOTHING_TO_KEEP = {
    ("nvidia_smi_compute_apps", name)
    for name in ("01.txt", "03.txt", "07.txt", "09.txt", "11.txt", "13.txt", "15.txt")
} | {("dcgm_exporter_metrics", "04.txt"), ("prometheus_query_range", "03.txt")}
# A default table cut right after its header, in the issue it was pasted into.
NOTHING_TO_KEEP |= {("nvidia_smi_default", "21.txt")}
# One untimed scrape whose counters give no figure without a second one (request counts only, or
# histogram buckets cut before their sum and count).
NOTHING_TO_KEEP |= {("vllm_metrics", "04.txt")} | {
    ("triton_metrics", name) for name in ("03.txt", "04.txt", "05.txt")
}

_NVIDIA_SMI = (
    "nvidia-smi-csv",
    "nvidia-smi-table",
    "nvidia-smi-q",
    "nvidia-smi-dmon",
    "nvidia-smi-pmon",
    "nvidia-smi-compute-apps",
)
FIELD_EXPECTED = {
    "memsum": ("pytorch-memory",),
    "oom": ("pytorch-oom", "vllm-log", "tgi-log"),  # an OOM inside a vLLM or TGI log: read with the log
    "prom": ("prometheus-text",),
    "smi": _NVIDIA_SMI,  # every nvidia-smi form, a folder of them
    "tgi": ("tgi-log",),
    "triton": ("triton-log",),
    "vllm": ("vllm-log",),
    # A device fault the driver states without an Xid line (a GSP heartbeat timeout, "Reset required"):
    # read by the statement catalogue (statements/nvidia-driver.yaml) wherever it stands.
    "xid": ("kernel-xid", "statements"),
}
FIELD_UNREAD: set[tuple[str, str]] = set()
# Recognised with nothing to keep: untimed single scrapes whose metrics give no figure without a second
# scrape (process metrics only, request counters, SGLang's capacity gauges, JetStream's histograms, a
# scrape mangled before its samples).
FIELD_NOTHING_TO_KEEP = {
    ("prom", name)
    for name in (
        "01_vllm_v1_process_only_cut.txt",
        "02_vllm_054_quote_mangled.txt",
        "03_vllm_aioprometheus_2023.txt",
        "06_sglang_2024_with_curl.txt",
        "08_jetstream_histograms.txt",
    )
}
# A vLLM log (its own line format) of a worker's traceback only, cut mid-message ("CUDA out of").
FIELD_NOTHING_TO_KEEP |= {("vllm", "13.log")}


def expectation(path: Path) -> tuple[tuple[str, ...], str]:
    """The importers one of which must read ``path``, and "rows", "unread" or "nothing to keep"."""
    key = (path.parent.name, path.name)
    if path.is_relative_to(FIELD):
        expected, unread, nothing = FIELD_EXPECTED[key[0]], FIELD_UNREAD, FIELD_NOTHING_TO_KEEP
    else:
        expected, unread, nothing = EXPECTED[key[0]], LOOK_ALIKES, NOTHING_TO_KEEP
    if key in unread:
        return (), "unread"
    return expected, "nothing to keep" if key in nothing else "rows"
