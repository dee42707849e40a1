"""Prometheus text exposition in a file (one scrape or many) -> server and gpu tables.

One parser, ``prometheus_client``'s. vLLM, Triton and TGI metrics map to the
server table exactly as ``diagnose record --metrics-url`` maps them
(:func:`diagnose.engines.metrics.engine_maps`); dcgm-exporter's per-GPU
fields map to the gpu table, and its count of clock events to the reasons' bits.
Several scrapes in one file are told apart by their repeated header; rates and
per-window means need the scrapes' times, so they come only from samples that
carry timestamps. Without any, the file's modification time is the scrape's
time, with a warning.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

import pandas as pd

from diagnose.engines.metrics import (
    detect_engine,
    engine_maps,
    engine_row,
    gpu_fields_by_lower_name,
    parse_families,
    sum_samples,
)
from diagnose.importers.base import Claim, Imported, Importer, Source, Strength, claim
from diagnose.units import counted

if TYPE_CHECKING:  # prometheus_client is imported where a page is parsed: not on every start
    from prometheus_client.metrics_core import Metric

# A name may hold colons (recording rules), but one ending in a colon before its value is a
# "Key:   value" report (an allocator's stats), not a sample.
_SAMPLE_LINE = re.compile(
    r"^[A-Za-z_:][A-Za-z0-9_:]*(?<!:)(?:\{[^}]*\})?[ \t]+"
    r"(?:[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+)|[-+]?Inf|NaN)(?:[ \t]+-?\d+)?[ \t]*$",
    re.MULTILINE,
)
# dcgm-exporter's free framebuffer feeds no column of its own: with the used one, the card's total.
_DCGM_FB_FREE = "dcgm_fi_dev_fb_free"
# dcgm-exporter's own count of clock events in its window, one sample per reason by its clock_event label
# (internal/pkg/collector/clock_events_collector.go, 3.3.5-3.4.0 on): each reason's NVML bit.
_DCGM_CLOCK_EVENTS = "dcgm_exp_clock_events_count"
_CLOCK_EVENT_BITS = {
    "gpu_idle": 0x1,
    "clocks_setting": 0x2,
    "power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sync_boost": 0x10,
    "sw_thermal": 0x20,
    "hw_thermal": 0x40,
    "hw_power_brake": 0x80,
    "display_clocks": 0x100,
}


class PrometheusTextImporter(Importer):
    name = "prometheus-text"
    description = (
        "Prometheus /metrics scrapes (one or many) of vLLM, SGLang, llama.cpp, TGI, Triton, Ray Serve,"
        " KServe, MindIE or dcgm-exporter, read by the metric catalogue (metrics/)"
    )

    def recognise(self, head: str) -> Claim | None:
        kept = list(exposition_lines(head.splitlines(), []))
        samples = sum(1 for line in kept if not line.startswith("#"))
        if samples >= 1 and any(line.startswith(("# TYPE ", "# HELP ")) for line in kept):
            return claim(Strength.DOCUMENT, len(kept))  # the exposition format's own comments
        return claim(Strength.SHAPE, len(kept)) if samples >= 3 else None

    def read(self, source: Source, tz: str | None = None) -> Imported:
        """One scrape at a time, each turned into rows as it is read: a file of a day's scrapes is
        never held whole."""
        result = Imported()
        skipped: list[int] = []
        rows = _ScrapeRows()
        scrapes = 0
        last: tuple[dict, list[Metric]] | None = (
            None  # the last scrape, for a file whose scrapes have no time
        )
        untimed = 0
        for number, scrape in enumerate(_scrapes(exposition_lines(source.lines(), skipped)), start=1):
            try:
                families = list(parse_families(scrape))  # parsed once, read thrice
            except ValueError as error:
                families, refused = _without_refused_lines(scrape)
                if not families:
                    result.warnings.append(f"scrape {number}: not valid exposition text ({error}); skipped")
                    continue
                result.warnings.append(
                    f"scrape {number}: {counted(len(refused), 'sample line')} the parser refused left out "
                    f"(a label set the paste shortened, a value cut): {refused[0][:80]}"
                )
            scrapes += 1
            stamp, samples = _scrape_time(families), sum_samples(families)
            last = (samples, families)
            if stamp is None:
                untimed += 1
            elif not untimed:
                rows.add(stamp, samples, families)
        if skipped:
            shown = ", ".join(map(str, skipped[:5])) + (" ..." if len(skipped) > 5 else "")
            result.warnings.append(
                f"skipped {counted(len(skipped), 'line')} of something else than exposition text (a shell "
                f"prompt, a line cut short): line {shown}"
            )
        if last is None:
            return result
        if untimed:
            if scrapes > 1:
                result.warnings.append(f"{scrapes} scrapes without timestamps: only the last is used")
            result.warnings.append(
                "no sample timestamps: the scrape is taken at the file's modification time"
            )
            rows = _ScrapeRows()
            rows.add(source.mtime, *last)
        server_rows, gpu_rows, engine = rows.server, rows.gpu, rows.engine
        lifetime = rows.scrapes == 1
        maps = engine_maps()
        if lifetime and engine in maps:  # one scrape: its counters' means are over the server's life
            server_rows = [engine_row(maps[engine], rows.first_stamp, rows.first_samples, None, 0.0, True)]
        filled = [row for row in server_rows if any(v is not None for k, v in row.items() if k != "ts")]
        if lifetime and filled:
            result.warnings.append(
                "one scrape: its means (queue, compute, e2e) are over the server's whole life, "
                "and rates need a second scrape"
            )
        if server_rows and not filled:
            result.warnings.append(f"{engine} metrics, but none that one scrape can give a figure for")
        server_rows = filled
        if server_rows:
            result.tables["server"] = pd.DataFrame(server_rows)
        if gpu_rows:
            result.tables["gpu"] = pd.DataFrame(gpu_rows)
        return result


_TYPE_LINE = re.compile(
    r"^# TYPE [A-Za-z_:][A-Za-z0-9_:]* "
    r"(?:counter|gauge|histogram|summary|untyped|unknown|info|stateset|gaugehistogram)$"
)
_HELP_LINE = re.compile(r"^# HELP [A-Za-z_:][A-Za-z0-9_:]*(?: .*)?$")


def exposition_lines(lines: Iterable[str], skipped: list[int]) -> Iterator[str]:
    """The exposition lines of pasted text; the numbers of the lines dropped go to ``skipped``.

    Quotes, fences and prompts are gone already (:mod:`diagnose.importers.mend`); what
    is left that is not exposition text (a line cut short, a cut ``# TYPE``, notes)
    would make the whole scrape unparsable: blank lines go silently, the rest are
    dropped and counted.
    """
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith(">") and _SAMPLE_LINE.match(unquoted := stripped.lstrip("> ")):
            stripped = unquoted  # one sample quoted in Markdown, where the quotes were not on every line
        if stripped.startswith("#"):
            is_type, is_help = stripped.startswith("# TYPE"), stripped.startswith("# HELP")
            if (is_type and not _TYPE_LINE.match(stripped)) or (is_help and not _HELP_LINE.match(stripped)):
                skipped.append(number)
                continue
            yield stripped
        elif _SAMPLE_LINE.match(stripped):
            yield stripped
        else:
            skipped.append(number)


def _without_refused_lines(scrape: str) -> tuple[list[Metric], list[str]]:
    """The scrape's families less its sample lines the parser refuses on their own (``{...,le="5"}``,
    a label set the person pasting shortened), and those lines. Each is tried alone: one bad line
    makes the parser refuse the whole page, the rest of which says what it says."""
    kept, refused = [], []
    for line in scrape.splitlines():
        if line.startswith("#") or not line.strip() or _parses(line):
            kept.append(line)
        else:
            refused.append(line)
    if not refused:
        return [], []
    try:
        return list(parse_families("\n".join(kept) + "\n")), refused
    except ValueError:
        return [], refused


def _parses(line: str) -> bool:
    try:
        list(parse_families(line + "\n"))
    except ValueError:
        return False
    return True


def _scrapes(lines: Iterable[str]) -> Iterator[str]:
    """Each scrape's text: a new scrape starts where the file's first ``# HELP``/``# TYPE`` line comes
    again (a scrape without them is one scrape to the end)."""
    first: str | None = None
    current: list[str] = []
    for line in lines:
        if line.startswith("# source:"):
            continue
        if first is None and line.startswith(("# HELP", "# TYPE")):
            first = line
        elif line == first and current:
            yield "\n".join(current) + "\n"
            current = []
        current.append(line)
    if current:
        yield "\n".join(current) + "\n"


class _ScrapeRows:
    """The rows of timed scrapes, made as each is read: the engine's (from the difference with the
    scrape before) and the GPUs'. The engine is told from the first scrape."""

    def __init__(self) -> None:
        self.server: list[dict] = []
        self.gpu: list[dict] = []
        self.engine: str | None = None
        self.scrapes = 0
        self.first_stamp = 0.0
        self.first_samples: dict[str, float] = {}
        self._previous: tuple[float, dict] | None = None

    def add(self, stamp: float, samples: dict, families: list[Metric]) -> None:
        if self.scrapes == 0:
            self.engine, self.first_stamp, self.first_samples = detect_engine(samples), stamp, samples
        self.scrapes += 1
        maps = engine_maps()
        if self.engine in maps:
            previous = self._previous
            before, elapsed = (previous[1], stamp - previous[0]) if previous else (None, 0.0)
            self.server.append(engine_row(maps[self.engine], stamp, samples, before, elapsed, False))
        self.gpu += _dcgm_rows(families, stamp) + _triton_gpu_rows(families, stamp)
        self._previous = (stamp, samples)


def _scrape_time(families: list[Metric]) -> float | None:
    stamps = [
        float(sample.timestamp)
        for family in families
        for sample in family.samples
        if sample.timestamp is not None
    ]
    return max(stamps) if stamps else None


def _triton_gpu_rows(families: list[Metric], stamp: float) -> list[dict]:
    """Triton's nv_gpu_* gauges, one row per GPU, numbered in the order the scrape lists them."""
    fields = gpu_fields_by_lower_name("triton")
    rows: dict[str, dict] = {}
    for family in families:
        for sample in family.samples:
            field = fields.get(sample.name.lower())
            if field is None:
                continue
            uuid = sample.labels.get("gpu_uuid", "")
            row = rows.setdefault(uuid, {"ts": stamp, "gpu": len(rows), "gpu_uuid": uuid or None})
            row[field[0]] = float(sample.value) * field[1]
    return list(rows.values())


def _dcgm_rows(families: list[Metric], stamp: float) -> list[dict]:
    """One row per GPU (or MIG slice); of two fields that name one column, the catalogue's first wins (a
    MIG slice has the profiling field only, a whole GPU both)."""
    fields = gpu_fields_by_lower_name("dcgm-exporter")
    rank = {name: at for at, name in enumerate(fields)}
    rows: dict[str, dict] = {}
    taken: dict[tuple[str, str], int] = {}  # (GPU, column) -> the rank of the field that set it
    free: dict[str, float] = {}
    events: dict[str, int] = {}  # GPU -> the bits of the clock events its window saw
    for family in families:
        for sample in family.samples:
            name = sample.name.lower()
            gpu = sample.labels.get("gpu", "0")
            instance = sample.labels.get("GPU_I_ID")
            key = f"{gpu}/{instance}" if instance else gpu
            if name == _DCGM_FB_FREE:
                free[key] = float(sample.value) * 2**20
            field = fields.get(name)
            if field is None and name != _DCGM_CLOCK_EVENTS:
                continue
            row = rows.setdefault(key, {"ts": stamp, "gpu": int(gpu) if gpu.isdigit() else None})
            if field is None:  # the exporter's count of clock events, by its clock_event label
                bit = (
                    _CLOCK_EVENT_BITS.get(sample.labels.get("clock_event", ""), 0) if sample.value > 0 else 0
                )
                events[key] = events.get(key, 0) | bit
                continue
            column, scale = field
            if instance:
                row["mig_instance"] = instance
            if rank[name] <= taken.get((key, column), rank[name]):
                row[column] = float(sample.value) * scale
                taken[(key, column)] = rank[name]
    for gpu, row in rows.items():
        if gpu in free and "mem_used_bytes" in row and "mem_total_bytes" not in row:
            row["mem_total_bytes"] = row["mem_used_bytes"] + free[gpu]
        if gpu in events and "throttle_reasons" not in row:  # the field itself, where exported, is the state
            row["throttle_reasons"] = float(events[gpu])
    return list(rows.values())
