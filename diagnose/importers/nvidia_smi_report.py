"""The nvidia-smi forms people paste most: the default table, ``nvidia-smi -q`` and its XML form
``-q -x`` -> gpu tables.

The first two are read line by line with patterns for the lines that carry figures, so
a table cut short, a pasted prompt above it or several snapshots in one file
still give what they hold. The XML is read a document at a time (``-q -x -l 1`` writes one a
second), its elements named as ``-q``'s sections and keys, so one reading serves both.

The time of a snapshot is its date line (the default table's first line, ``-q``'s ``Timestamp``,
the XML's ``<timestamp>``), local time without an offset (``--tz``); without one, the file's
modification time, with a warning.
The driver and CUDA versions go to the dump's environment.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import pandas as pd

from diagnose.importers.base import Imported, Importer, Source, local_epoch, zone_note
from diagnose.units import counted

_MIB = 2**20
_DATE = re.compile(r"^\s*(\w{3} \w{3}\s+\d{1,2} \d{2}:\d{2}:\d{2} \d{4})\s*$")
_HEADER = re.compile(r"NVIDIA-SMI\s+(\S+)\s+Driver Version:\s+(\S+)(?:\s+CUDA Version:\s+(\S+))?")
_BUS_ID = r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d"
_GPU_LINE = re.compile(
    rf"^\|\s*(?P<gpu>\d+)\s+(?P<name>.+?)\s+(?:On|Off|WDDM|TCC|MCDM|N/A)\s*\|\s*(?P<bus>{_BUS_ID})"
)
_USAGE_LINE = re.compile(
    r"^\|\s*(?P<fan>\S+)\s+(?P<temp>\d+|N/A)C?\s+(?P<perf>\S+)\s+(?P<draw>[\d.]+|N/A)W?\s*/\s*(?P<cap>[\d.]+|N/A)W?\s*"
    r"\|\s*(?P<used>\d+)MiB\s*/\s*(?P<total>\d+)MiB\s*\|\s*(?P<util>\d+|N/A)%?"
)
_PROCESS_LINE = re.compile(
    r"^\|\s*(?P<gpu>\d+)\s+(?:(?:\d+|N/A)\s+(?:\d+|N/A)\s+)?(?P<pid>\d+)\s+(?P<type>C\+G|M\+C|C|G|M)\s+"
    r"(?P<name>.+?)\s+(?P<mem>\d+MiB|N/A)\s*\|"
)
_QUERY_STAMP = re.compile(r"^Timestamp\s*:\s*(.+?)\s*$")
_QUERY_GPU = re.compile(rf"^GPU ({_BUS_ID})\s*$", re.MULTILINE)
# -q is a tree of "key : value" lines, four spaces a level, keys of words with single spaces. Two lines
# glued together leave the second's indentation inside the first: a run of four spaces or more before
# a key (a letter first, then its colon) or a section's name ending the line starts a line there.
_GLUED_LINE = re.compile(r"(?<=\S)(?=\s{4,}[A-Za-z][\w .()/+-]*?(?:\s*:|$))")
_KEY_VALUE = re.compile(r"^(?P<indent>\s*)(?P<key>[^:]+?)\s*(?::\s*(?P<value>.*?))?\s*$")
_NUMBER = re.compile(r"^(-?\d+(?:\.\d+)?)\s*([A-Za-z%]*)")
_REASONS = {
    "idle": "gpu_idle",
    "applications clocks setting": "applications_clocks",
    "sw power cap": "sw_power_cap",
    "hw slowdown": "hw_slowdown",
    "hw thermal slowdown": "hw_thermal_slowdown",
    "hw power brake slowdown": "hw_power_brake_slowdown",
    "sync boost": "sync_boost",
    "sw thermal slowdown": "sw_thermal_slowdown",
    "display clock setting": "display_clocks",
}


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


@dataclass
class _Snapshot:
    stamp: str | None = None
    gpus: list[dict] = field(default_factory=list)
    processes: list[dict] = field(default_factory=list)
    # The paste starts inside the report, after its header: the GPUs before the first one shown are
    # not known, so each GPU's index is its Minor Number (nvidia-smi's index on a default system).
    headless: bool = False
    # A section pasted without its GPU line: kept only if no GPU line follows (a report cut at its
    # start shows a section's tail, then the next GPU's line: that GPU is the first one whole).
    fragment: bool = False


class NvidiaSmiTableImporter(Importer):
    name = "nvidia-smi-table"
    description = "the default `nvidia-smi` table (GPUs and processes; several snapshots, cut or not)"
    example = "| N/A   33C    P0   119W / 700W |  71237MiB / 81559MiB |     97%      Default |"

    def recognise(self, head: str) -> bool:
        return bool(_HEADER.search(head)) or any(_USAGE_LINE.match(line) for line in head.splitlines())

    def read(self, source: Source, tz: str | None = None) -> Imported:
        result = Imported()
        snapshots: list[_Snapshot] = []
        stamp: str | None = None
        current: _Snapshot | None = None
        gpu_line: dict | None = None
        for line in source.lines():
            if date := _DATE.match(line):
                stamp = date.group(1)
                continue
            if header := _HEADER.search(line):
                current = _Snapshot(stamp)
                snapshots.append(current)
                stamp = None
                result.environment.update(_versions(header.group(2), header.group(3)))
                continue
            if current is None:  # a table pasted without its header
                current = _Snapshot(stamp)
                snapshots.append(current)
            if match := _GPU_LINE.match(line):
                gpu_line = {"gpu": int(match["gpu"]), "gpu_name": match["name"].strip(), "bus": match["bus"]}
            elif (match := _USAGE_LINE.match(line)) and gpu_line is not None:
                current.gpus.append({**gpu_line, **_usage(match)})
                gpu_line = None
            elif match := _PROCESS_LINE.match(line):
                memory = match["mem"]
                current.processes.append(
                    {
                        "gpu": int(match["gpu"]),
                        "pid": int(match["pid"]),
                        "name": match["name"].strip(),
                        "mem_used_bytes": None if memory == "N/A" else int(memory[:-3]) * _MIB,
                    }
                )
        _tables(result, snapshots, source.mtime, tz)
        return result


class NvidiaSmiQueryImporter(Importer):
    name = "nvidia-smi-q"
    description = "`nvidia-smi -q` (every GPU's figures, clock event reasons and processes)"
    example = "==============NVSMI LOG============== ... FB Memory Usage / Used : 71237 MiB"

    def recognise(self, head: str) -> bool:
        if "NVSMI LOG" in head or (bool(_QUERY_GPU.search(head)) and "Product Name" in head):
            return True
        # A section pasted alone (`nvidia-smi -q | grep -A8 'Clocks Throttle'`): its name, then its figures
        return bool(_SECTION_LINE.search(head)) and len(_FIGURE_LINE.findall(head)) >= 3

    def read(self, source: Source, tz: str | None = None) -> Imported:
        result = Imported()
        snapshots: list[_Snapshot] = []
        stamp: str | None = None
        gpu: dict | None = None
        process: dict | None = None
        sections: list[tuple[int, str]] = []
        for line in (piece for glued in source.lines() for piece in _GLUED_LINE.split(glued)):
            if "NVSMI LOG" in line:
                snapshots.append(_Snapshot(stamp))
                gpu = process = None
                continue
            if match := _QUERY_STAMP.match(line):
                if not snapshots or snapshots[-1].gpus:
                    snapshots.append(_Snapshot())
                snapshots[-1].stamp = _query_stamp(match.group(1))
                continue
            if match := _QUERY_GPU.match(line):
                if snapshots and snapshots[-1].fragment:
                    snapshots.pop()
                    result.warnings = [w for w in result.warnings if "without its GPU line" not in w]
                if not snapshots:
                    snapshots.append(_Snapshot(stamp, headless=True))
                    result.warnings.append(
                        "the report starts after its header: each GPU's index is its Minor Number"
                    )
                gpu = {"gpu": len(snapshots[-1].gpus), "bus": match.group(1), "reasons": None}
                snapshots[-1].gpus.append(gpu)
                sections, process = [], None
                continue
            if gpu is None and _SECTION_LINE.match(line):
                # A section without its GPU line: the paste holds one GPU's, index unknown
                snapshots.append(_Snapshot(stamp, headless=True, fragment=True))
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
            process = _query_field(gpu, snapshots[-1], process, path_keys, value)
        _tables(result, snapshots, source.mtime, tz)
        return result


class NvidiaSmiXmlImporter(Importer):
    name = "nvidia-smi-xml"
    description = "`nvidia-smi -q -x` (the XML form of -q: one document, or one a second with -l)"
    example = '<nvidia_smi_log><timestamp>...</timestamp><gpu id="00000000:07:00.0"><product_name>...'

    def recognise(self, head: str) -> bool:
        # the document, or a GPU's element pasted without the document around it
        return "<nvidia_smi_log>" in head or bool(_XML_GPU.search(head) and "<product_name>" in head)

    def read(self, source: Source, tz: str | None = None) -> Imported:
        result = Imported()
        snapshots: list[_Snapshot] = []
        skipped = cut = 0
        for document in _xml_documents(source.lines()):
            if "<!ENTITY" in document or "<!DOCTYPE" in document:
                skipped += 1  # a document declaring entities is not nvidia-smi's: never expanded
                continue
            root, whole = _parsed(document)
            if root is None or root.tag != "nvidia_smi_log":
                skipped += 1
                continue
            cut += not whole
            snapshots.append(_xml_snapshot(root, result))
        if cut:
            result.warnings.append(f"read {counted(cut, 'XML document')} cut short up to the cut")
        if skipped:
            result.warnings.append(
                f"left out {counted(skipped, 'XML document')}: not nvidia-smi's or unreadable"
            )
        _tables(result, snapshots, source.mtime, tz)
        return result


_XML_GPU = re.compile(r'<gpu id="[0-9A-Fa-f:.]+">')


def _xml_documents(lines: Iterable[str]) -> Iterator[str]:
    """Each ``<nvidia_smi_log>`` document's text (its prolog and DOCTYPE left out: nothing needs them);
    a document cut short, as far as it goes; GPU elements pasted without a document, in one."""
    current: list[str] | None = None
    for line in lines:
        if current is None:
            start = line.find("<nvidia_smi_log>")
            if start < 0 and (gpu := _XML_GPU.search(line)):
                current, line = ["<nvidia_smi_log>"], line[gpu.start() :]
            elif start < 0:
                continue
            else:
                current, line = [], line[start:]
        end = line.find("</nvidia_smi_log>")
        if end >= 0:
            current.append(line[: end + len("</nvidia_smi_log>")])
            yield "\n".join(current)
            current = None
        else:
            current.append(line)
    if current:
        yield "\n".join(current)


def _parsed(document: str) -> tuple[ElementTree.Element | None, bool]:
    """The document's tree and whether it was whole. A document cut short (a paste that stopped, a
    fragment with no end) keeps the elements it holds: the standard library's pull parser builds the
    tree as it reads, so what came before the cut is there when the cut is found."""
    parser: ElementTree.XMLPullParser = ElementTree.XMLPullParser(events=("start",))
    root: ElementTree.Element | None = None
    whole = True
    try:
        parser.feed(document)
        parser.close()
    except ElementTree.ParseError:
        whole = False
    events = parser.read_events()
    try:  # the events before the cut, then the cut's error again
        for event in events:
            element = event[-1]  # (event, element)
            if root is None and isinstance(element, ElementTree.Element):
                root = element
    except ElementTree.ParseError:
        whole = False
    return root, whole


# An element's path in -q -x, as -q names its section and key (what _query_field reads)
_XML_FIELDS = {
    "product_name": ("Product Name",),
    "fb_memory_usage/total": ("FB Memory Usage", "Total"),
    "fb_memory_usage/used": ("FB Memory Usage", "Used"),
    "utilization/gpu_util": ("Utilization", "Gpu"),
    "utilization/memory_util": ("Utilization", "Memory"),
    "clocks/sm_clock": ("Clocks", "SM"),
    "max_clocks/sm_clock": ("Max Clocks", "SM"),
    "temperature/gpu_temp": ("Temperature", "GPU Current Temp"),
    "power_readings/power_draw": ("Power Readings", "Power Draw"),
    "power_readings/power_limit": ("Power Readings", "Power Limit"),
    "power_readings/current_power_limit": ("Power Readings", "Current Power Limit"),
    "power_readings/default_power_limit": ("Power Readings", "Default Power Limit"),
    "gpu_power_readings/power_draw": ("GPU Power Readings", "Power Draw"),
    "gpu_power_readings/instant_power_draw": ("GPU Power Readings", "Instantaneous Power Draw"),
    "gpu_power_readings/current_power_limit": ("GPU Power Readings", "Current Power Limit"),
    "gpu_power_readings/default_power_limit": ("GPU Power Readings", "Default Power Limit"),
}
_XML_PROCESS = {"pid": "Process ID", "process_name": "Name", "used_memory": "Used GPU Memory"}
_XML_REASON = re.compile(r"^clocks_(?:throttle|event)_reason_(\w+)$")


def _xml_snapshot(root: ElementTree.Element, result: Imported) -> _Snapshot:
    snapshot = _Snapshot(_query_stamp(root.findtext("timestamp") or ""))
    result.environment.update(_versions(root.findtext("driver_version"), root.findtext("cuda_version")))
    for element in root.findall("gpu"):
        gpu: dict = {"gpu": len(snapshot.gpus), "bus": element.get("id"), "reasons": None}
        snapshot.gpus.append(gpu)
        for path, keys in _XML_FIELDS.items():
            value = element.findtext(path)
            if value is not None and value.strip():
                _query_field(gpu, snapshot, None, keys, value.strip())
        for reasons in (element.find("clocks_throttle_reasons"), element.find("clocks_event_reasons")):
            for reason in reasons if reasons is not None else ():
                named = _XML_REASON.match(reason.tag)
                if named and (state := (reason.text or "").strip()):
                    words = {"gpu_idle": "idle"}.get(named.group(1), named.group(1).replace("_", " "))
                    _query_field(gpu, snapshot, None, ("Clocks Event Reasons", words), state)
        for info in element.findall("processes/process_info"):
            process: dict | None = None
            for tag, key in _XML_PROCESS.items():
                value = info.findtext(tag)
                if value is not None and value.strip():
                    process = _query_field(gpu, snapshot, process, ("Processes", key), value.strip())
    return snapshot


def _query_field(
    gpu: dict, snapshot: _Snapshot, process: dict | None, keys: tuple, value: str
) -> dict | None:
    """One ``key : value`` line of a GPU's section, by its path of section names."""
    section, key = (keys[0] if len(keys) > 1 else ""), keys[-1]
    if keys == ("Product Name",):
        gpu["gpu_name"] = value
    elif keys == ("Minor Number",) and snapshot.headless and value.isdigit():
        gpu["gpu"] = int(value)
    elif section == "FB Memory Usage" and key in ("Total", "Used"):
        gpu[f"mem_{key.lower()}_bytes"] = _mib(value)
    elif section == "Utilization" and key == "Gpu":
        gpu["util_pct"] = _number(value)
    elif section == "Utilization" and key == "Memory":
        gpu["mem_bw_util_pct"] = _number(value)
    elif section == "Clocks" and key == "SM":
        gpu["sm_clock_mhz"] = _number(value)
    elif section == "Max Clocks" and key == "SM":
        gpu["max_sm_clock_mhz"] = _number(value)
    elif section in ("Clocks Event Reasons", "Clocks Throttle Reasons") and key.lower() in _REASONS:
        # "none" is said only where the reasons were read: a paste that lost them says nothing
        gpu["reasons"] = gpu["reasons"] or []
        if value == "Active":
            gpu["reasons"].append(_REASONS[key.lower()])
    elif section == "Temperature" and key == "GPU Current Temp":
        gpu["temp_c"] = _number(value)
    elif section in ("GPU Power Readings", "Power Readings") and len(keys) == 2:
        column = {
            "Power Draw": "power_w",
            "Instantaneous Power Draw": "power_w",
            "Current Power Limit": "power_limit_w",
            "Power Limit": "power_limit_w",
            "Default Power Limit": "default_power_limit_w",
        }.get(key)
        if column and (column != "power_w" or "power_w" not in gpu):
            gpu[column] = _number(value)
    elif section == "Processes":
        if key == "Process ID":
            pid = int(_number(value) or 0)
            process = {"gpu": gpu["gpu"], "pid": pid, "name": None, "mem_used_bytes": None}
            snapshot.processes.append(process)
        elif process is not None and key == "Name":
            process["name"] = value
        elif process is not None and key == "Used GPU Memory":
            process["mem_used_bytes"] = _mib(value)
    return process


def _tables(result: Imported, snapshots: list[_Snapshot], mtime: float, tz: str | None) -> None:
    gpus, processes, untimed = [], [], 0
    for snapshot in snapshots:
        if not snapshot.gpus and not snapshot.processes:
            continue
        when = _epoch(snapshot.stamp, tz)
        if when is None:
            untimed += 1
            when = mtime
        for row in snapshot.gpus:
            reasons = row.pop("reasons", None)
            if reasons is not None:
                row["throttle_reasons"] = ";".join(reasons) or "none"
            gpus.append({"ts": when, **{k: v for k, v in row.items() if k != "bus"}})
        processes += [{"ts": when, **row} for row in snapshot.processes]
    if untimed:
        result.warnings.append(
            f"{counted(untimed, 'snapshot')} without a date: each taken at the file's modification time"
        )
    if untimed < len([s for s in snapshots if s.gpus or s.processes]):
        result.warnings.append(zone_note("nvidia-smi dates", tz))
    if gpus:
        result.tables["gpu"] = pd.DataFrame(gpus)
    if processes:
        result.tables["gpu_processes"] = pd.DataFrame(processes)


def _usage(match: re.Match[str]) -> dict:
    def number(group: str) -> float | None:
        return None if match[group] == "N/A" else float(match[group])

    return {
        "temp_c": number("temp"),
        "power_w": number("draw"),
        "power_limit_w": number("cap"),
        "mem_used_bytes": int(match["used"]) * _MIB,
        "mem_total_bytes": int(match["total"]) * _MIB,
        "util_pct": number("util"),
    }


def _versions(driver: str | None, cuda: str | None) -> dict[str, str]:
    found = {"driver_version": driver, "cuda_version": cuda}
    return {key: value for key, value in found.items() if value}


def _number(value: str) -> float | None:
    match = _NUMBER.match(value.strip())
    return float(match.group(1)) if match else None


def _mib(value: str) -> float | None:
    number = _number(value)
    return None if number is None else number * _MIB


def _query_stamp(text: str) -> str | None:
    match = _DATE.match(text)
    return match.group(1) if match else text.strip() or None


def _epoch(stamp: str | None, tz: str | None) -> float | None:
    if not stamp:
        return None
    parsed = pd.to_datetime(" ".join(stamp.split()), format="%a %b %d %H:%M:%S %Y", errors="coerce")
    return None if pd.isna(parsed) else local_epoch(parsed, tz)
