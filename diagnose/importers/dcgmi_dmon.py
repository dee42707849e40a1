"""``dcgmi dmon`` as pasted (NVIDIA DCGM) -> the ``gpu`` table.

Its layout is dcgmi/DeviceMonitor.cpp's (DCGM 2.x to 4.6): a header of the fields' short names after
``#Entity`` (``# Entity`` before DCGM 3), a line of their units after ``ID`` (``Id``), then a row per
entity and sample, named by its kind and id (``GPU 0``, ``GPU-I 1``, ``CPU 0``, ``GPU 0 LINK 1``) and
holding each field's value or ``N/A``. The header repeats every so many rows. Only GPU rows are read:
a MIG instance's (``GPU-I``) figures are not its GPU's.

A short name is the field's ``shortName`` in dcgmlib/src/dcgm_fields.cpp (the same in DCGM v3.3.9,
v4.2.3 and v4.6.0, where 4.6 renamed the fields and kept the old names as aliases); what each field
is in the ``gpu`` table, and in which unit, is metrics/dcgm-exporter.yaml's (dcgm-exporter exports the
same fields, with the same values). dcgmi prints no time: samples are ``-d`` milliseconds apart (1000
unless the pasted command line says), the last at the file's modification time.
"""

from __future__ import annotations

import re
from functools import cache
from itertools import chain

import pandas as pd

from diagnose.engines.metrics import gpu_fields
from diagnose.importers.base import Claim, Imported, Importer, Source, Strength, claim, filled
from diagnose.importers.nvidia_smi_monitor import stamps_by_round
from diagnose.units import counted

# shortName -> field (dcgm_fields.cpp), for the fields the gpu table holds
_SHORT_NAMES = {
    "GPUTL": "DCGM_FI_DEV_GPU_UTIL",
    "MCUTL": "DCGM_FI_DEV_MEM_COPY_UTIL",
    "SMCLK": "DCGM_FI_DEV_SM_CLOCK",
    "SMMAX": "DCGM_FI_DEV_MAX_SM_CLOCK",
    "DVCCTR": "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",  # DCGM_FI_DEV_CLOCK_THROTTLE_REASONS before 4.0
    "POWER": "DCGM_FI_DEV_POWER_USAGE",
    "PMLMT": "DCGM_FI_DEV_POWER_MGMT_LIMIT",
    "PMDEF": "DCGM_FI_DEV_POWER_MGMT_LIMIT_DEF",
    "TMPTR": "DCGM_FI_DEV_GPU_TEMP",
    "FBUSD": "DCGM_FI_DEV_FB_USED",
    "FBTTL": "DCGM_FI_DEV_FB_TOTAL",
    "GRACT": "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "SMACT": "DCGM_FI_PROF_SM_ACTIVE",
    "DRAMA": "DCGM_FI_PROF_DRAM_ACTIVE",
    "PCITX": "DCGM_FI_PROF_PCIE_TX_BYTES",
    "PCIRX": "DCGM_FI_PROF_PCIE_RX_BYTES",
}
_HEADER = re.compile(r"^#\s?Entity\s+(?P<names>[A-Z][A-Z0-9]{2,}(?:\s+[A-Z][A-Z0-9]{2,})*)\s*$")
_UNITS = re.compile(r"^\s*I[Dd]\b")
_ENTITY = re.compile(
    r"^(?P<kind>GPU|GPU-I|GPU-CI|CPU|CPU CORE|SW|NvSwitch|LINK)\s+(?P<id>\d+)\s+(?P<rest>.*)$"
)
_DELAY = re.compile(r"\bdcgmi\s+dmon\b.*?(?:-d|--delay)[ =]?(\d+)")


class DcgmiDmonImporter(Importer):
    name = "dcgmi-dmon"
    description = (
        "`dcgmi dmon` (NVIDIA DCGM): each GPU's utilisation, SM activity, clocks and clock-event reasons, "
        "power, temperature and memory, by its fields' short names"
    )

    def recognise(self, head: str) -> Claim | None:
        lines = head.splitlines()
        for at, line in enumerate(lines):
            if _HEADER.match(line.strip()) and at + 1 < len(lines) and _UNITS.match(lines[at + 1]):
                return claim(Strength.DOCUMENT, filled(lines[at:]))
        return None

    def read(self, source: Source, tz: str | None = None) -> Imported:
        result = Imported()
        names: list[str] | None = None
        delay_ms, said_delay = 1000.0, False
        rows: list[dict] = []
        unknown: set[str] = set()
        for raw in chain(source.commands, source.lines()):  # the command, typed after a prompt or bare
            line = raw.strip()
            if (command := _DELAY.search(line)) is not None:
                delay_ms, said_delay = float(command.group(1)), True
                continue
            if (header := _HEADER.match(line)) is not None:
                names = header["names"].split()
                unknown.update(name for name in names if name not in _SHORT_NAMES)
                continue
            entity = _ENTITY.match(line)
            if names is None or entity is None or entity["kind"] != "GPU":
                continue
            cells = entity["rest"].split()
            if len(cells) != len(names):
                continue
            rows.append({"gpu": int(entity["id"]), **_figures(names, cells)})
        if not rows:
            return result
        frame = pd.DataFrame(rows)
        frame["ts"] = stamps_by_round(frame["gpu"], source.mtime, delay_ms / 1000.0)
        result.tables["gpu"] = frame
        how = f"its -d of {delay_ms:g} ms" if said_delay else "dcgmi's default -d of 1000 ms"
        result.warnings.append(
            f"dcgmi prints no times: samples taken {delay_ms / 1000:g} s apart ({how}), the last at the "
            "file's modification time"
        )
        if unknown:
            shown = ", ".join(sorted(unknown))
            result.warnings.append(
                f"{counted(len(unknown), 'field')} not read ({shown}): no column of the gpu table"
            )
        return result


@cache
def _fields() -> dict[str, tuple[int, str, float]]:
    """Each short name's (rank, gpu column, scale): its field's in metrics/dcgm-exporter.yaml, where the
    rank orders two fields of one column as the catalogue lists them."""
    fields = gpu_fields("dcgm-exporter")
    rank = {field: at for at, field in enumerate(fields)}
    return {short: (rank[field], *fields[field]) for short, field in _SHORT_NAMES.items() if field in fields}


def _figures(names: list[str], cells: list[str]) -> dict[str, float]:
    """A row's values in the gpu table's columns and units; of two fields for one column, the first
    metrics/dcgm-exporter.yaml lists."""
    found: dict[str, tuple[int, float]] = {}
    for name, cell in zip(names, cells, strict=True):
        field = _fields().get(name)
        if field is None or (value := _number(cell)) is None:
            continue
        rank, column, scale = field
        if column not in found or rank < found[column][0]:
            found[column] = (rank, value * scale)
    return {column: value for column, (_, value) in found.items()}


def _number(text: str) -> float | None:
    if text in ("N/A", "-"):
        return None
    try:
        return float(text)
    except ValueError:
        return None
