"""Importers: read the evidence people already have (logs, nvidia-smi output, ...) as dump tables.

Each importer claims a file by its content, not its name, after
:func:`~diagnose.importers.mend.mend` has undone what pasting did to it (a
prefix on every line, a quote, a wrap). The strongest claim reads it (what
the importer found: its format's own header, its writer's statements, or
lines of its shape; then how many lines are its own), never the order the
importers are listed in; the report names the importer, the rows it produced
and what was undone. A file no importer recognises is listed as not used. Importers read
text with our own parsers; nothing they read is executed or unpickled.
"""

from __future__ import annotations

from pathlib import Path

from diagnose.importers.base import (
    HEAD_BYTES,
    Cadence,
    Claim,
    FileImporter,
    Imported,
    Importer,
    Source,
    Strength,
    text_head,
)
from diagnose.importers.bench_serving import BenchServingImporter
from diagnose.importers.dcgmi_dmon import DcgmiDmonImporter
from diagnose.importers.genai_perf import GenaiPerfImporter
from diagnose.importers.gin_log import GinAccessLogImporter
from diagnose.importers.guidellm import GuidellmImporter
from diagnose.importers.iostat import IostatImporter
from diagnose.importers.llamacpp_log import LlamaCppLogImporter
from diagnose.importers.mend import Mended, mend
from diagnose.importers.nsys_sqlite import NsysSqliteImporter
from diagnose.importers.nsys_stats import NsysStatsImporter
from diagnose.importers.nvidia_smi import NvidiaSmiComputeAppsImporter, NvidiaSmiQueryGpuImporter
from diagnose.importers.nvidia_smi_monitor import DmonImporter, PmonImporter
from diagnose.importers.nvidia_smi_report import NvidiaSmiQueryImporter, NvidiaSmiTableImporter
from diagnose.importers.nvidia_smi_xml import NvidiaSmiXmlImporter
from diagnose.importers.nvprof import NvprofImporter
from diagnose.importers.nvprof_trace import NvprofTraceImporter
from diagnose.importers.oom_log import OomLogImporter
from diagnose.importers.perf_analyzer import PerfAnalyzerImporter
from diagnose.importers.pidstat import PidstatImporter
from diagnose.importers.profiler_table import ProfilerTableImporter
from diagnose.importers.profiler_trace import KinetoTraceImporter, OrtProfileImporter
from diagnose.importers.prometheus_text import PrometheusTextImporter
from diagnose.importers.request_log import RequestLogImporter
from diagnose.importers.rocm_smi import RocmSmiImporter
from diagnose.importers.sar import SarImporter
from diagnose.importers.series import GrafanaCsvImporter, PromQueryImporter
from diagnose.importers.sglang_log import SglangLogImporter
from diagnose.importers.tgi_log import TgiLogImporter
from diagnose.importers.top import TopImporter
from diagnose.importers.torch_memory import TorchMemoryImporter
from diagnose.importers.traces import TraceImporter
from diagnose.importers.triton_log import TritonLogImporter
from diagnose.importers.trtllm_log import TrtllmIterLogImporter
from diagnose.importers.vllm_log import VllmLogImporter
from diagnose.importers.vmstat import VmstatImporter
from diagnose.importers.xid import XidImporter

# Listed by class name: the order decides nothing (recognise takes the strongest claim).
IMPORTERS: tuple[Importer, ...] = (
    BenchServingImporter(),
    DcgmiDmonImporter(),
    DmonImporter(),
    GenaiPerfImporter(),
    GinAccessLogImporter(),
    GrafanaCsvImporter(),
    GuidellmImporter(),
    IostatImporter(),
    KinetoTraceImporter(),
    LlamaCppLogImporter(),
    NsysSqliteImporter(),
    NsysStatsImporter(),
    NvidiaSmiComputeAppsImporter(),
    NvidiaSmiQueryGpuImporter(),
    NvidiaSmiQueryImporter(),
    NvidiaSmiTableImporter(),
    NvidiaSmiXmlImporter(),
    NvprofImporter(),
    NvprofTraceImporter(),
    OomLogImporter(),
    OrtProfileImporter(),
    PerfAnalyzerImporter(),
    PidstatImporter(),
    PmonImporter(),
    ProfilerTableImporter(),
    PrometheusTextImporter(),
    PromQueryImporter(),
    RequestLogImporter(),
    RocmSmiImporter(),
    SarImporter(),
    SglangLogImporter(),
    TgiLogImporter(),
    TopImporter(),
    TorchMemoryImporter(),
    TraceImporter(),
    TritonLogImporter(),
    TrtllmIterLogImporter(),
    VllmLogImporter(),
    VmstatImporter(),
    XidImporter(),
)

__all__ = [
    "HEAD_BYTES",
    "IMPORTERS",
    "Cadence",
    "Claim",
    "FileImporter",
    "Imported",
    "Importer",
    "Mended",
    "Source",
    "Strength",
    "mend",
    "recognise",
    "recognise_binary",
    "text_head",
]


def recognise(head: str) -> Importer | None:
    """The importer with the strongest claim on the file whose start is ``head``, or None. Equal
    claims go to the first name in alphabetical order, so the choice never depends on the listing;
    no documented example is claimed equally by two importers (tests/test_importer_claims.py)."""
    claims = [(found, importer) for importer in IMPORTERS if (found := importer.recognise(head))]
    if not claims:
        return None
    strongest = max(found for found, _ in claims)
    return min((importer for found, importer in claims if found == strongest), key=lambda i: i.name)


def recognise_binary(path: Path) -> Importer | None:
    """The importer of a binary file (an nsys SQLite export), told by its bytes: one format has one."""
    return next((i for i in IMPORTERS if isinstance(i, FileImporter) and i.recognise_file(path)), None)
