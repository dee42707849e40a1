"""``rocm-smi`` as pasted (AMD GPUs) -> the ``gpu`` table.

Its default output is the "Concise Info" table (ROCm/rocm_smi_lib, python_smi_tools/rocm_smi.py,
``showAllConcise``), one row per GPU under a header whose columns changed across releases:

    GPU  Temp (DieEdge)  AvgPwr  SCLK    MCLK     Fan  Perf  PwrCap  VRAM%  GPU%     (ROCm 3.x - 5.7)
    0    34.0c           37.0W   800Mhz  1600Mhz  0%   auto  300.0W    0%   0%

    Device  Node  IDs (DID, GUID)  Temp (Edge)  Power (Avg)  Partitions (Mem, Compute, ID)  SCLK ...
    0       2     0x740f, 12345    40.0°C       42.0W        N/A, N/A, 0                    800Mhz ... (6.x)

A row's cells are told by their units, as the script prints them, not by position (6.0 added a model
column holding spaces): the temperature (``°C``, ``c`` before 5.x), the power then the cap (``W``), the
shader clock then the memory clock (``Mhz``), and the fan's, VRAM's and the GPU's busy share (``%``,
in that order). What a row gives: ``temp_c``, ``power_w``, ``sm_clock_mhz`` (SCLK, the shader
clock), ``power_limit_w`` (PwrCap) and ``util_pct`` (GPU%). The table has no time: it is taken at the
file's modification time, and of several tables (``watch rocm-smi``) the last.
"""

from __future__ import annotations

import re

import pandas as pd

from diagnose.importers.base import Claim, Imported, Importer, Source, header_claim

_HEADER_WORDS = ("SCLK", "MCLK", "PwrCap", "GPU%")
_ROW = re.compile(r"^\s*(?P<gpu>\d+)\s")
_TEMP = re.compile(r"^(\d+(?:\.\d+)?)(?:°C|c|C)$")
_WATTS = re.compile(r"^(\d+(?:\.\d+)?)W$")
_MHZ = re.compile(r"^(\d+(?:\.\d+)?)Mhz$", re.IGNORECASE)
_SHARE = re.compile(r"^(\d+(?:\.\d+)?)%$")


class RocmSmiImporter(Importer):
    name = "rocm-smi"
    description = "`rocm-smi`'s Concise Info table (AMD GPUs): temperature, power and cap, clocks, busy share"

    def recognise(self, head: str) -> Claim | None:
        return header_claim(head, _is_header)

    def read(self, source: Source, tz: str | None = None) -> Imported:
        result = Imported()
        tables: list[list[dict]] = []
        for line in source.lines():
            if _is_header(line):
                tables.append([])
            elif tables and (row := _row(line)) is not None:
                tables[-1].append({"ts": source.mtime, **row})
        filled = [table for table in tables if table]
        if not filled:
            return result
        result.tables["gpu"] = pd.DataFrame(filled[-1])
        if len(filled) > 1:
            result.warnings.append(f"{len(filled)} rocm-smi tables without times: only the last is used")
        result.warnings.append("rocm-smi prints no time: the table is taken at the file's modification time")
        return result


def _is_header(line: str) -> bool:
    words = line.split()
    return all(word in words for word in _HEADER_WORDS)


def _row(line: str) -> dict | None:
    """A GPU's row by its cells' units (see the module's docstring), or None for any other line."""
    start = _ROW.match(line)
    if start is None:
        return None
    cells = line.split()[1:]
    clocked = [at for at, cell in enumerate(cells) if _MHZ.match(cell)]
    # The power comes before the clocks, the cap after them: either may read N/A or Unsupported
    split = clocked[0] if clocked else len(cells)
    power = [float(m[1]) for cell in cells[:split] if (m := _WATTS.match(cell))]
    cap = [float(m[1]) for cell in cells[split:] if (m := _WATTS.match(cell))]
    clocks = [float(cells[at][:-3]) for at in clocked]
    shares = [float(m[1]) for cell in cells if (m := _SHARE.match(cell))]
    temps = [float(m[1]) for cell in cells if (m := _TEMP.match(cell))]
    if not clocks and len(shares) < 2:  # a numbered line of something else
        return None
    row: dict = {"gpu": int(start["gpu"])}
    if temps:
        row["temp_c"] = temps[0]
    if power:
        row["power_w"] = power[0]
    if cap:
        row["power_limit_w"] = cap[0]
    if clocks:
        row["sm_clock_mhz"] = clocks[0]
    if len(shares) >= 2:
        row["util_pct"] = shares[-1]
    return row
