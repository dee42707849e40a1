"""nvprof's summary, as pasted -> the ``op_summary`` table.

nvprof, the CUDA toolkit's command-line profiler before Nsight Systems, prints in its default (summary)
mode one table a run (its documentation, "Summary Mode"): ``Time(%)``, ``Time``, ``Calls``, ``Avg``,
``Min``, ``Max`` and ``Name``, each time with its unit (``ns``, ``us``, ``ms``, ``s``). Since CUDA 9 a
``Type`` column labels each section's first row (``GPU activities:``, ``API calls:``; ``OpenACC``,
``OpenMP`` and others for what this project does not read); before, each section had its own header line
after a ``==PID== API calls:`` line. A row is read where its figures agree as a summary's must (minimum
<= average <= maximum, time = average x calls within the rounding of four significant figures), so a
look-alike table is not taken for one. GPU activities are kernels, copies (``[CUDA memcpy HtoD]``) and
memsets, their time the GPU's (``self_device_us``); API calls are the host's (``self_host_us``).
"""

from __future__ import annotations

import re

import pandas as pd

from diagnose.importers.base import Claim, Imported, Importer, Source, Strength, claim
from diagnose.importers.nsys_stats import summary_row
from diagnose.units import counted

_TIME = r"\d+(?:\.\d+)?(?:ns|us|ms|s)"
_FIGURE = re.compile(r"(\d+(?:\.\d+)?)(ns|us|ms|s)")
_HEADER = re.compile(r"Time\s*\(%\)\s+Time\s+Calls\s+Avg\s+Min\s+Max\s+Name")
_ROW = re.compile(
    rf"^\s*(?:(?P<section>[A-Za-z][\w ()]*?):\s+)?(?P<pct>\d{{1,3}}(?:\.\d+)?)%\s+(?P<time>{_TIME})"
    rf"\s+(?P<calls>\d+)\s+(?P<avg>{_TIME})\s+(?P<min>{_TIME})\s+(?P<max>{_TIME})\s+(?P<name>\S.*?)\s*$"
)
# The old layout's section line: "==1234== API calls:" before its own header.
_SECTION_LINE = re.compile(r"^==\d+==\s+(?P<section>[A-Za-z][\w ()]*?):\s*$")
_UNIT_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}
_READ = {"gpu activities": "gpu", "api calls": "api"}
# nvprof prints four significant figures: a product of two rounded figures is off by up to ~0.1 %.
_AGREEMENT = 0.01


class NvprofImporter(Importer):
    name = "nvprof"
    description = "nvprof's summary (GPU activities and API calls: Time(%), Time, Calls, Avg, Min, Max, Name)"

    def recognise(self, head: str) -> Claim | None:
        lines = head.splitlines()
        rows = [match for line in lines if (match := _ROW.match(line)) and _agrees(match)]
        labelled = any(_READ.get((row["section"] or "").lower()) for row in rows)
        if len(rows) < 2 or not (labelled or any(_HEADER.search(line) for line in lines)):
            return None
        return claim(
            Strength.DOCUMENT, len(rows)
        )  # its header, or its own section labels ("GPU activities:")

    def read(self, source: Source, tz: str | None = None) -> Imported:
        result = Imported()
        section: str | None = "gpu"  # the old layout's first table, under "Profiling result:"
        rows: list[dict[str, object]] = []
        disagreeing = 0
        for line in source.lines():
            if started := _SECTION_LINE.match(line):
                section = _READ.get(started["section"].lower())
                if started["section"].lower() == "profiling result":
                    section = "gpu"
                continue
            match = _ROW.match(line)
            if match is None:
                continue
            if match["section"]:
                section = _READ.get(match["section"].lower())
            if section is None:
                continue
            if not _agrees(match):
                disagreeing += 1
                continue
            name = match["name"]
            rows.append(summary_row(name, _kind(section, name), int(match["calls"]), _us(match["time"])))
        if disagreeing:
            result.warnings.append(
                f"left out {counted(disagreeing, 'row')} whose figures disagree (time against average x "
                "calls, or an average outside its minimum and maximum): not a summary's, or cut"
            )
        if rows:
            result.tables["op_summary"] = pd.DataFrame(rows)
        return result


def _us(text: str) -> float:
    """A time as nvprof writes it (``729.72us``) in microseconds."""
    figure, unit = _FIGURE.fullmatch(text).groups()  # type: ignore[union-attr]  # the row matched _TIME
    return float(figure) * _UNIT_US[unit]


def _agrees(match: re.Match[str]) -> bool:
    total, calls = _us(match["time"]), int(match["calls"])
    average, low, high = _us(match["avg"]), _us(match["min"]), _us(match["max"])
    if calls == 0 or not low <= average * (1 + _AGREEMENT) or not average <= high * (1 + _AGREEMENT):
        return False
    return abs(average * calls - total) <= _AGREEMENT * max(total, 1e-9)


def _kind(section: str, name: str) -> str:
    if section == "api":
        return "runtime"
    if name.startswith("[CUDA memcpy"):
        return "memcpy"
    if name.startswith("[CUDA memset"):
        return "memset"
    return "kernel"
