"""The nvidia-smi forms people paste most: the default table and ``nvidia-smi -q`` -> gpu tables.

Both are read line by line with patterns for the lines that carry figures, so a table cut short, a
pasted prompt above it or several snapshots in one file still give what they hold. The XML form
``-q -x`` is read by :mod:`~diagnose.importers.nvidia_smi_xml`.

The default table's layout is fixed per driver generation (its columns only widen): a GPU's line
(index, name, bus id), then its figures' line (fan, temperature, performance state, power draw / cap,
memory used / total, utilisation). A figures line cut short keeps the cells that end before the cut
(each ends on its unit: ``34C``, ``237W``, ``81559MiB``); one cut inside a figure loses that figure.
The "MIG devices:" section gives a row per GPU instance (``mig_instance``: its GI ID, as dcgm-exporter's
``GPU_I_ID``) with its memory used / total; the compute instances of one GPU instance share its memory.

The time of a snapshot is its date line (the default table's first line, ``-q``'s ``Timestamp``),
local time without an offset (``--tz``); without one, the file's modification time, with a warning.
The driver and CUDA versions go to the dump's environment.
"""

from __future__ import annotations

import re

from diagnose.importers.base import Claim, Imported, Importer, Source, Strength, claim
from diagnose.importers.nvidia_smi_snapshot import (
    DATE,
    MIB,
    Snapshot,
    query_field,
    query_stamp,
    snapshot_tables,
    versions,
)

_HEADER = re.compile(r"NVIDIA-SMI\s+(\S+)\s+Driver Version:\s+(\S+)(?:\s+CUDA Version:\s+(\S+))?")
_BUS_ID = r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d"
_GPU_LINE = re.compile(
    rf"^\|\s*(?P<gpu>\d+)\s+(?P<name>.+?)\s+(?:On|Off|WDDM|TCC|MCDM|N/A)\s*\|\s*(?P<bus>{_BUS_ID})"
)
_USAGE_LINE = re.compile(
    r"^\|\s*(?P<fan>\S+)\s+(?P<temp>\d+|N/A)C?\s+(?P<perf>\S+)\s+(?P<draw>[\d.]+|N/A)W?\s*/\s*(?P<cap>[\d.]+|N/A)W?\s*"
    r"\|\s*(?P<used>\d+)MiB\s*/\s*(?P<total>\d+)MiB\s*\|\s*(?:(?P<util>\d+)%|N/A)"
)
# A figures line cut short: each cell up to the cut that ends on its unit (or is N/A) before it
_CUT_USAGE_LINE = re.compile(
    r"^\|\s*(?P<fan>\S+)\s+(?P<temp>\d+C|N/A)(?=\s|$)"
    r"(?:\s+(?P<perf>P\d+|N/A)(?=\s|$)"
    r"(?:\s+(?P<draw>[\d.]+W|N/A)(?=[\s/]|$)"
    r"(?:\s*/\s*(?P<cap>[\d.]+W|N/A)(?=[\s|]|$)"
    r"(?:\s*\|\s*(?P<used>\d+MiB)\s*/\s*(?P<total>\d+MiB)(?=[\s|]|$)"
    r"(?:\s*\|\s*(?P<util>\d+%|N/A)(?=[\s|]|$))?)?)?)?)?"
)
_CUT_CELLS = {  # a cell of the figures line: its column, its unit, its scale
    "temp": ("temp_c", "C", 1),
    "draw": ("power_w", "W", 1),
    "cap": ("power_limit_w", "W", 1),
    "used": ("mem_used_bytes", "MiB", MIB),
    "total": ("mem_total_bytes", "MiB", MIB),
    "util": ("util_pct", "%", 1),
}
# "MIG devices:": GPU, GI ID, CI ID, MIG Dev | memory used / total | SM, ECC | shared engines
_MIG_ROW = re.compile(r"^\|\s*(?P<gpu>\d+)\s+(?P<gi>\d+)\s+(?P<ci>\d+)\s+(?P<dev>\d+)\s*\|")
_MIG_MEMORY = re.compile(r"\s*(?P<used>\d+)MiB\s*/\s*(?P<total>\d+)MiB(?=[\s|]|$)")
_PROCESS_LINE = re.compile(
    r"^\|\s*(?P<gpu>\d+)\s+(?:(?:\d+|N/A)\s+(?:\d+|N/A)\s+)?(?P<pid>\d+)\s+(?P<type>C\+G|M\+C|C|G|M)\s+"
    r"(?P<name>.+?)\s+(?P<mem>\d+MiB|N/A)\s*\|"
)
_PROCESSES_TITLE = re.compile(r"^\|\s*Processes:\s*\|", re.MULTILINE)
_QUERY_STAMP = re.compile(r"^Timestamp\s*:\s*(.+?)\s*$")
_QUERY_GPU = re.compile(rf"^GPU ({_BUS_ID})\s*$", re.MULTILINE)
# -q is a tree of "key : value" lines, four spaces a level, keys of words with single spaces. Two lines
# glued together leave the second's indentation inside the first: a run of four spaces or more before
# a key (a letter first, then its colon) or a section's name ending the line starts a line there.
_GLUED_LINE = re.compile(r"(?<=\S)(?=\s{4,}[A-Za-z][\w .()/+-]*?(?:\s*:|$))")
_KEY_VALUE = re.compile(r"^(?P<indent>\s*)(?P<key>[^:]+?)\s*(?::\s*(?P<value>.*?))?\s*$")


# The sections of a GPU in -q (nvidia-smi's documentation, "-q" output, across driver generations):
# a paste of one section alone, without the report's banner or its GPU line, is still that GPU's.
_SECTIONS = frozenset(
    {
        "FB Memory Usage",
        "BAR1 Memory Usage",
        "Utilization",
        "Clocks",
        "Max Clocks",
        "Applications Clocks",
        "Default Applications Clocks",
        "Clocks Event Reasons",
        "Clocks Throttle Reasons",
        "Temperature",
        "GPU Power Readings",
        "Power Readings",
    }
)
_SECTION_LINE = re.compile(
    r"^\s*(" + "|".join(re.escape(name) for name in sorted(_SECTIONS)) + r")\s*$", re.M
)
_FIGURE_LINE = re.compile(
    r"^\s+[A-Z][\w ]*?\s*:\s*(?:Active|Not Active|\d+(?:\.\d+)?\s*(?:MiB|MHz|W|C|%))\s*$", re.M
)


class NvidiaSmiTableImporter(Importer):
    name = "nvidia-smi-table"
    description = "the default `nvidia-smi` table (GPUs, MIG devices, processes; many snapshots, cut or not)"

    def recognise(self, head: str) -> Claim | None:
        lines = head.splitlines()
        own = sum(1 for line in lines if line.lstrip().startswith(("|", "+-", "+=")))  # the table's layout
        if _HEADER.search(head):
            return claim(Strength.DOCUMENT, own)
        # A GPU's figures line, its Processes section pasted alone (with a row of it), or that section's
        # rows without its title: "|  GPU  GI  CI  PID  Type  Process name  GPU Memory Usage |" in the
        # table's own layout, which no other output shares
        processes = sum(1 for line in lines if _PROCESS_LINE.match(line))
        said = (
            any(_USAGE_LINE.match(line) or _mig_memory(line) for line in lines)
            or (bool(_PROCESSES_TITLE.search(head)) and processes >= 1)
            or processes >= 2
        )
        return claim(Strength.STATEMENT, own) if said else None

    def read(self, source: Source, tz: str | None = None) -> Imported:
        result = Imported()
        snapshots: list[Snapshot] = []
        stamp: str | None = None
        current: Snapshot | None = None
        gpu_line: dict | None = None
        for line in source.lines():
            if date := DATE.match(line):
                stamp = date.group(1)
                continue
            if header := _HEADER.search(line):
                _keep_cut(gpu_line, current, result)
                current, gpu_line = Snapshot(stamp), None
                snapshots.append(current)
                stamp = None
                result.environment.update(versions(header.group(2), header.group(3)))
                continue
            if current is None:  # a table pasted without its header
                current = Snapshot(stamp)
                snapshots.append(current)
            if match := _GPU_LINE.match(line):
                _keep_cut(gpu_line, current, result)
                gpu_line = {"gpu": int(match["gpu"]), "gpu_name": match["name"].strip(), "bus": match["bus"]}
            elif (match := _USAGE_LINE.match(line)) and gpu_line is not None:
                gpu_line.pop("cut", None)  # a whole figures line after a cut-looking one: the whole one wins
                current.gpus.append({**gpu_line, **_usage(match)})
                gpu_line = None
            elif gpu_line is not None and "cut" not in gpu_line and (match := _CUT_USAGE_LINE.match(line)):
                gpu_line["cut"] = (match, line.strip())  # kept if no whole figures line follows
            elif _MIG_ROW.match(line):
                _mig_device(line, current, result)
            elif match := _PROCESS_LINE.match(line):
                memory = match["mem"]
                current.processes.append(
                    {
                        "gpu": int(match["gpu"]),
                        "pid": int(match["pid"]),
                        "name": match["name"].strip(),
                        "mem_used_bytes": None if memory == "N/A" else int(memory[:-3]) * MIB,
                    }
                )
        _keep_cut(gpu_line, current, result)
        snapshot_tables(result, snapshots, source.mtime, tz)
        return result


class NvidiaSmiQueryImporter(Importer):
    name = "nvidia-smi-q"
    description = "`nvidia-smi -q` (every GPU's figures, clock event reasons and processes)"

    def recognise(self, head: str) -> Claim | None:
        figures = len(_FIGURE_LINE.findall(head))
        if "NVSMI LOG" in head or (bool(_QUERY_GPU.search(head)) and "Product Name" in head):
            return claim(Strength.DOCUMENT, figures + 1)
        # A section pasted alone (`nvidia-smi -q | grep -A8 'Clocks Throttle'`): its name, then its figures
        return claim(Strength.SHAPE, figures) if _SECTION_LINE.search(head) and figures >= 3 else None

    def read(self, source: Source, tz: str | None = None) -> Imported:
        result = Imported()
        snapshots: list[Snapshot] = []
        stamp: str | None = None
        gpu: dict | None = None
        process: dict | None = None
        sections: list[tuple[int, str]] = []
        for line in (piece for glued in source.lines() for piece in _GLUED_LINE.split(glued)):
            if "NVSMI LOG" in line:
                snapshots.append(Snapshot(stamp))
                gpu = process = None
                continue
            if match := _QUERY_STAMP.match(line):
                if not snapshots or snapshots[-1].gpus:
                    snapshots.append(Snapshot())
                snapshots[-1].stamp = query_stamp(match.group(1))
                continue
            if match := _QUERY_GPU.match(line):
                if snapshots and snapshots[-1].fragment:
                    snapshots.pop()
                    result.warnings = [w for w in result.warnings if "without its GPU line" not in w]
                if not snapshots:
                    snapshots.append(Snapshot(stamp, headless=True))
                    result.warnings.append(
                        "the report starts after its header: each GPU's index is its Minor Number"
                    )
                gpu = {"gpu": len(snapshots[-1].gpus), "bus": match.group(1), "reasons": None}
                snapshots[-1].gpus.append(gpu)
                sections, process = [], None
                continue
            if gpu is None and _SECTION_LINE.match(line):
                # A section without its GPU line: the paste holds one GPU's, index unknown
                snapshots.append(Snapshot(stamp, headless=True, fragment=True))
                result.warnings.append(
                    f"a section of nvidia-smi -q without its GPU line ({line.strip()}): read as GPU 0"
                )
                gpu = {"gpu": 0, "bus": None, "reasons": None}
                snapshots[-1].gpus.append(gpu)
                sections, process = [(len(line) - len(line.lstrip()), line.strip())], None
                continue
            parsed = _KEY_VALUE.match(line)
            unindented = gpu is not None and not parsed["indent"] if parsed else False
            if parsed is None or not line.strip() or (unindented and not _SECTION_LINE.match(line)):
                continue  # a GPU's lines are indented: one that is not is a wrapped line's tail (or a
                # section's name, in a fragment whose common indentation was taken off)
            indent, key, value = len(parsed["indent"]), parsed["key"].strip(), parsed["value"]
            if gpu is None:
                if key in ("Driver Version", "CUDA Version") and value:
                    result.environment.update(
                        {"driver_version" if key.startswith("Driver") else "cuda_version": value}
                    )
                continue
            while sections and sections[-1][0] >= indent:
                sections.pop()
            if value is None:
                sections.append((indent, key))
                continue
            path_keys = (*(name for _, name in sections), key)
            process = query_field(gpu, snapshots[-1], process, path_keys, value)
        snapshot_tables(result, snapshots, source.mtime, tz)
        return result


def _usage(match: re.Match[str]) -> dict:
    def number(group: str) -> float | None:
        return None if match[group] in ("N/A", None) else float(match[group])

    return {
        "temp_c": number("temp"),
        "power_w": number("draw"),
        "power_limit_w": number("cap"),
        "mem_used_bytes": int(match["used"]) * MIB,
        "mem_total_bytes": int(match["total"]) * MIB,
        "util_pct": number("util"),
    }


def _keep_cut(gpu_line: dict | None, snapshot: Snapshot | None, result: Imported) -> None:
    """A GPU whose figures line was cut short, with the cells before the cut."""
    if gpu_line is None or snapshot is None or "cut" not in gpu_line:
        return
    match, line = gpu_line.pop("cut")
    figures = {
        column: None if text == "N/A" else float(text.removesuffix(unit)) * scale
        for cell, (column, unit, scale) in _CUT_CELLS.items()
        if (text := match[cell]) is not None
    }
    snapshot.gpus.append({**gpu_line, **figures})
    result.warnings.append(
        f"GPU {gpu_line['gpu']}'s figures line is cut short ({line!r}): read the cells before the cut"
    )


def _mig_memory(line: str) -> re.Match[str] | None:
    """A MIG device's row's memory cell, where the row has one whole."""
    row = _MIG_ROW.match(line)
    return _MIG_MEMORY.match(line, row.end()) if row else None


def _mig_device(line: str, snapshot: Snapshot, result: Imported) -> None:
    """One MIG device's row: its GPU instance's memory, once per GPU instance."""
    row = _MIG_ROW.match(line)
    memory = _mig_memory(line)
    if row is None or memory is None:
        result.warnings.append(f"skipped a MIG device's line whose memory is not whole: {line.strip()!r}")
        return
    gpu, instance = int(row["gpu"]), row["gi"]
    if any(seen["gpu"] == gpu and seen["mig_instance"] == instance for seen in snapshot.mig):
        return  # another compute instance of the same GPU instance: the same memory
    snapshot.mig.append(
        {
            "gpu": gpu,
            "mig_instance": instance,
            "mem_used_bytes": int(memory["used"]) * MIB,
            "mem_total_bytes": int(memory["total"]) * MIB,
        }
    )
