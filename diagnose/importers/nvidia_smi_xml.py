"""``nvidia-smi -q -x``, the XML form of ``-q`` -> gpu tables.

Read a document at a time (``-q -x -l 1`` writes one a second), its elements named as ``-q``'s sections
and keys (nvidia_smi_snapshot), so one reading serves both. A paste keeps what it holds: a document cut
short, a ``<gpu id=…>`` element without the document, or a run of a GPU element's children without
either (copied from the middle of a report, its elements' end tags where their start was cut off): read
as GPU 0, as ``-q``'s sections pasted alone are.
A web page's rendering of the document (``&lt;`` ``&gt;`` ``&nbsp;``) is undone before any importer
sees it (importers.mend); entities the document itself declares are never expanded.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterable, Iterator

from diagnose.importers.base import Claim, Imported, Importer, Source, Strength, claim
from diagnose.importers.nvidia_smi_snapshot import (
    Snapshot,
    query_field,
    query_stamp,
    snapshot_tables,
    versions,
)
from diagnose.units import counted

_XML_GPU = re.compile(r'<gpu id="[0-9A-Fa-f:.]+">')
# The XML names of -q's sections (nvsmi_device_v12.dtd), a GPU element's children
_XML_SECTION = re.compile(
    r"<(fb_memory_usage|bar1_memory_usage|utilization|clocks|max_clocks|applications_clocks"
    r"|default_applications_clocks|clocks_event_reasons|clocks_throttle_reasons|temperature"
    r"|gpu_power_readings|power_readings|processes)>"
)
_XML_LEAF = re.compile(r"<([a-z][a-z0-9_]*)>[^<>\n]*</\1>")
_START_TAG = re.compile(r"^\s*<(?:[a-z][a-z0-9_]*>|!)")  # a start tag, or a declaration (refused)
_TAG = re.compile(r"<(/?)([A-Za-z_][\w.-]*)(?:\s[^<>]*?)?(/?)>")
# An element's path in -q -x, as -q names its section and key (what query_field reads)
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
# The leaves a fragment is told by: those read here, and a GPU's own beside them
_GPU_LEAVES = frozenset(
    {path.rsplit("/", 1)[-1] for path in _XML_FIELDS} | set(_XML_PROCESS) | {"fan_speed", "performance_state"}
)


class NvidiaSmiXmlImporter(Importer):
    name = "nvidia-smi-xml"
    description = "`nvidia-smi -q -x` (the XML form of -q: one document, or one a second with -l)"

    def recognise(self, head: str) -> Claim | None:
        # the document, a GPU's element pasted without the document around it, or a part of one
        own = sum(1 for line in head.splitlines() if line.lstrip().startswith("<"))
        if "<nvidia_smi_log>" in head or (_XML_GPU.search(head) and "<product_name>" in head):
            return claim(Strength.DOCUMENT, own)
        return claim(Strength.SHAPE, own) if _is_fragment(head) else None

    def read(self, source: Source, tz: str | None = None) -> Imported:
        result = Imported()
        snapshots: list[Snapshot] = []
        skipped = cut = 0
        documents = list(_xml_documents(source.lines()))
        fragment = not documents and _is_fragment(source.text)
        if fragment:
            documents = [_fragment_document(source.lines())]
        for document in documents:
            if "<!ENTITY" in document or "<!DOCTYPE" in document:
                skipped += 1  # a document declaring entities is not nvidia-smi's: never expanded
                continue
            root, whole = _parsed(document)
            if root is None or root.tag != "nvidia_smi_log":
                skipped += 1
                continue
            cut += not whole and not fragment  # a fragment has no end of its own: no cut to tell
            snapshot = _xml_snapshot(root, result)
            if fragment:
                if not _holds_figures(snapshot):
                    continue  # nothing of a GPU's was read: no GPU 0 of nothing
                result.warnings.append(
                    "a part of a GPU's element of nvidia-smi -q -x without its start (<gpu id=…>): "
                    "read as GPU 0, up to where the paste stops"
                )
            snapshots.append(snapshot)
        if cut:
            result.warnings.append(f"read {counted(cut, 'XML document')} cut short up to the cut")
        if skipped:
            result.warnings.append(
                f"left out {counted(skipped, 'XML document')}: not nvidia-smi's or unreadable"
            )
        snapshot_tables(result, snapshots, source.mtime, tz)
        return result


def _is_fragment(text: str) -> bool:
    """A run of a GPU element's children: one of -q's sections by its XML name, and three whole
    ``<tag>value</tag>`` elements of a GPU's at least, with no document or GPU element to read them in."""
    return (
        "<nvidia_smi_log>" not in text
        and not _XML_GPU.search(text)
        and bool(_XML_SECTION.search(text))
        and sum(tag in _GPU_LEAVES or bool(_XML_REASON.match(tag)) for tag in _XML_LEAF.findall(text)) >= 3
    )


def _holds_figures(snapshot: Snapshot) -> bool:
    return bool(snapshot.processes) or any(
        set(gpu) - {"gpu", "bus", "reasons"} or gpu["reasons"] is not None for gpu in snapshot.gpus
    )


def _fragment_document(lines: Iterable[str]) -> str:
    """The fragment inside a document and a GPU element of our own, from its first start tag (or
    declaration), less the end tags of elements whose start was not pasted (a paste that begins inside
    ``<pci>`` closes it later): they would end the parse where the figures begin."""
    kept: list[str] = ["<nvidia_smi_log><gpu>"]
    open_tags: list[str] = []
    for line in lines:
        if len(kept) > 1 or _START_TAG.match(line):
            kept.append(_TAG.sub(lambda tag: _balanced(tag, open_tags), line))
    return "\n".join(kept)


def _balanced(tag: re.Match[str], open_tags: list[str]) -> str:
    """A tag as it stands where its element is open (or it opens one); an end tag with no start, dropped."""
    closing, name, empty = tag.group(1), tag.group(2), tag.group(3)
    if empty:
        return tag.group()
    if not closing:
        open_tags.append(name)
        return tag.group()
    if name in open_tags:
        while open_tags.pop() != name:  # closes it, and whatever opened inside it and was left open
            pass
        return tag.group()
    return ""


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


def _xml_snapshot(root: ElementTree.Element, result: Imported) -> Snapshot:
    snapshot = Snapshot(query_stamp(root.findtext("timestamp") or ""))
    result.environment.update(versions(root.findtext("driver_version"), root.findtext("cuda_version")))
    for element in root.findall("gpu"):
        gpu: dict = {"gpu": len(snapshot.gpus), "bus": element.get("id"), "reasons": None}
        snapshot.gpus.append(gpu)
        for path, keys in _XML_FIELDS.items():
            value = element.findtext(path)
            if value is not None and value.strip():
                query_field(gpu, snapshot, None, keys, value.strip())
        for reasons in (element.find("clocks_throttle_reasons"), element.find("clocks_event_reasons")):
            for reason in reasons if reasons is not None else ():
                named = _XML_REASON.match(reason.tag)
                if named and (state := (reason.text or "").strip()):
                    words = {"gpu_idle": "idle"}.get(named.group(1), named.group(1).replace("_", " "))
                    query_field(gpu, snapshot, None, ("Clocks Event Reasons", words), state)
        for info in element.findall("processes/process_info"):
            process: dict | None = None
            for tag, key in _XML_PROCESS.items():
                value = info.findtext(tag)
                if value is not None and value.strip():
                    process = query_field(gpu, snapshot, process, ("Processes", key), value.strip())
    return snapshot
