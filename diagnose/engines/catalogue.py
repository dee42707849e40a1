"""The metric catalogue: what each engine and exporter defines on /metrics, read from its source.

One YAML file a writer, in ``metrics/`` (metrics/README.md has the format): each metric's name as the
source registers it, its type, unit, labels, help text, file and releases, and, where it feeds one,
the column of the dump's server table. The scrape readers build their name maps from it
(:mod:`diagnose.engines.metrics`), so a metric is said once, where its writer defines it. The
catalogue is data, loaded with a safe YAML loader; a file that breaks the format is an error naming
the file and the entry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from diagnose.errors import CatalogueError
from diagnose.shipped import shipped_folder


class MetricType(StrEnum):
    GAUGE = "gauge"
    COUNTER = "counter"
    HISTOGRAM = "histogram"
    SUMMARY = "summary"
    INFO = "info"


class Unit(StrEnum):
    REQUESTS = "requests"
    TOKENS = "tokens"
    BLOCKS = "blocks"
    SECONDS = "seconds"
    MILLISECONDS = "milliseconds"
    MICROSECONDS = "microseconds"
    NANOSECONDS = "nanoseconds"
    BYTES = "bytes"
    MEBIBYTES = "mebibytes"
    RATIO = "ratio"
    PERCENT = "percent"
    WATTS = "watts"
    JOULES = "joules"
    CELSIUS = "celsius"
    MEGAHERTZ = "megahertz"
    COUNT = "count"
    BITMASK = "bitmask"
    INFO = "info"


# A share's label sets are not added up: the fullest cache is the one that preempts.
SHARES = frozenset({Unit.RATIO, Unit.PERCENT})

# What a server column's value is in, by its name's ending (docs/dump-format.md).
_COLUMN_UNITS = {"_ms": Unit.MILLISECONDS, "_pct": Unit.PERCENT, "_bytes": Unit.BYTES}
_TO = {  # (metric unit, column unit) -> factor
    (Unit.SECONDS, Unit.MILLISECONDS): 1e3,
    (Unit.MICROSECONDS, Unit.MILLISECONDS): 1e-3,
    (Unit.NANOSECONDS, Unit.MILLISECONDS): 1e-6,
    (Unit.RATIO, Unit.PERCENT): 100.0,
    (Unit.MEBIBYTES, Unit.BYTES): float(2**20),
}


@dataclass(frozen=True)
class MetricDef:
    """One metric as its writer defines it."""

    name: str
    engine: str
    type: MetricType
    unit: Unit
    labels: tuple[str, ...]
    help: str
    file: str
    releases: str
    columns: tuple[str, ...] = ()  # the server columns it feeds
    gpu_column: str | None = None  # a per-GPU gauge's column of the gpu table
    per: str | None = None  # a counter's denominator: the mean of this counter over that one
    label: tuple[str, str] | None = None  # only the samples with this label value
    note: str = ""

    def scale(self, column: str) -> float:
        """The factor from this metric's unit to ``column``'s."""
        target = next((unit for ending, unit in _COLUMN_UNITS.items() if column.endswith(ending)), None)
        if target is None or target == self.unit:
            return 1.0
        factor = _TO.get((self.unit, target))
        if factor is None:
            raise CatalogueError(
                f"{self.name} ({self.unit}) feeds {column} ({target}): no conversion between the two"
            )
        return factor


@dataclass(frozen=True)
class EngineMetrics:
    """One file of the catalogue: a writer's metrics."""

    engine: str
    writer: str
    repo: str
    prefix: str
    metrics: tuple[MetricDef, ...]
    repeated_by: frozenset[str] = frozenset()  # labels whose series repeat one figure


_NAME = re.compile(r"^[A-Za-z_:][A-Za-z0-9_:]*$")
_REQUIRED = ("name", "type", "unit", "labels", "help", "file", "releases")
_OPTIONAL = ("column", "gpu_column", "per", "label", "note")


def default_metrics_dir() -> Path:
    """The built-in catalogue: ``metrics/`` beside the package in a clone, packaged in a wheel."""
    return shipped_folder("metrics")


@cache
def builtin_metrics() -> tuple[EngineMetrics, ...]:
    return load_metrics(default_metrics_dir())


def load_metrics(folder: Path) -> tuple[EngineMetrics, ...]:
    return tuple(load_metrics_file(path) for path in sorted(folder.glob("*.yaml")))


def load_metrics_file(path: Path) -> EngineMetrics:
    """One writer's metrics (``metrics/WRITER.yaml``)."""
    try:
        text = path.read_text(encoding="utf-8")
        data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506 - safe
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        raise CatalogueError(f"{path}: not a readable YAML file ({error})") from error
    if not isinstance(data, dict) or not isinstance(data.get("metrics"), list) or "engine" not in data:
        raise CatalogueError(
            f"{path}: expected a mapping with `writer`, `engine`, `prefix` and a `metrics` list"
        )
    engine = str(data["engine"])
    repeated = data.get("repeated_by") or []
    if not isinstance(repeated, list):
        raise CatalogueError(f"{path}: repeated_by is a list of label names")
    metrics = tuple(
        _metric(entry, engine, f"{path.name}: metrics[{n}]") for n, entry in enumerate(data["metrics"])
    )
    return EngineMetrics(
        engine=engine,
        writer=str(data.get("writer", path.stem)),
        repo=str(data.get("repo", "")),
        prefix=str(data.get("prefix") or ""),
        metrics=metrics,
        repeated_by=frozenset(str(label) for label in repeated),
    )


def _metric(entry: Any, engine: str, where: str) -> MetricDef:
    if not isinstance(entry, dict):
        raise CatalogueError(f"{where}: expected a mapping, got {type(entry).__name__}")
    missing = [key for key in _REQUIRED if key not in entry]
    if missing:
        raise CatalogueError(f"{where}: missing {', '.join(missing)}")
    unknown = sorted(set(entry) - set(_REQUIRED) - set(_OPTIONAL))
    if unknown:
        keys = "key" if len(unknown) == 1 else "keys"
        raise CatalogueError(f"{where}: unknown {keys} {', '.join(unknown)}")
    name = str(entry["name"])
    where = f"{where} ({name})"
    if not _NAME.match(name):
        raise CatalogueError(f"{where}: not a Prometheus metric name")
    try:
        kind, unit = MetricType(str(entry["type"])), Unit(str(entry["unit"]))
    except ValueError as error:
        raise CatalogueError(f"{where}: {error}") from error
    columns = entry.get("column") or []
    columns = [columns] if isinstance(columns, str) else columns
    label = entry.get("label")
    if label is not None and not (isinstance(label, dict) and len(label) == 1):
        raise CatalogueError(f"{where}: label is one `name: value` pair")
    per = entry.get("per")
    if per is not None and kind is not MetricType.COUNTER:
        raise CatalogueError(f"{where}: only a counter is read per another counter")
    gpu_column = entry.get("gpu_column")
    if gpu_column is not None and kind is not MetricType.GAUGE:
        raise CatalogueError(f"{where}: only a gauge feeds a column of the gpu table (one reading a GPU)")
    metric = MetricDef(
        name=name,
        engine=engine,
        type=kind,
        unit=unit,
        labels=tuple(str(label_name) for label_name in entry["labels"] or ()),
        help=str(entry["help"] or ""),
        file=str(entry["file"]),
        releases=str(entry["releases"]),
        columns=tuple(str(column) for column in columns),
        gpu_column=None if gpu_column is None else str(gpu_column),
        per=None if per is None else str(per),
        label=None if label is None else next((str(k), str(v)) for k, v in label.items()),
        note=str(entry.get("note") or ""),
    )
    for column in (*metric.columns, *([metric.gpu_column] if metric.gpu_column else [])):
        try:
            metric.scale(column)  # a unit that cannot become the column's is the file's error, said here
        except CatalogueError as error:
            raise CatalogueError(f"{where}: {error}") from error
    return metric
