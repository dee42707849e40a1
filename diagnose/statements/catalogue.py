"""The catalogue of statements: what each engine and library writes about a cause, read from its source.

One YAML file a writer, in ``statements/`` (statements/README.md has the format). Each entry is a
template as the writer's source spells it, where it is written and in which releases, the event it
yields and a name for each figure. The catalogue is data, loaded with ``yaml.safe_load``; a file that
breaks the format is an error naming the file and the entry.
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
from diagnose.statements.template import Compiled, Style, TemplateError, compile_template
from diagnose.units import counted


class EventKind(StrEnum):
    """The events a statement may yield (docs/dump-format.md, events.jsonl)."""

    ENGINE_STALL = "engine_stall"
    ENGINE_WAIT = "engine_wait"
    ENGINE_DEAD = "engine_dead"
    ENGINE_START_FAILED = "engine_start_failed"
    PREEMPTION = "preemption"
    KV_CACHE_FULL = "kv_cache_full"
    # A request longer than the context (or the whole cache) allows: refused, truncated or shifted
    # however idle the engine is. A limit of its configuration, not pressure from load.
    REQUEST_TOO_LONG = "request_too_long"
    KV_CACHE_CONFIG = "kv_cache_config"
    # The server refused or dropped a request because its queue or its concurrency limit was full:
    # arrivals outran what it serves (not a KV cache, not one request too long).
    QUEUE_FULL = "queue_full"
    OOM = "oom"
    XID = "xid"
    THROTTLE = "throttle"
    RESTART = "restart"
    WARMUP_END = "warmup_end"


@dataclass(frozen=True)
class Statement:
    id: str
    writer: str
    event: EventKind
    template: str
    style: Style
    figures: tuple[str, ...]
    file: str
    releases: str
    level: str
    compiled: Compiled
    note: str = ""

    @property
    def source(self) -> str:
        """Where the writer writes it, as the report cites it."""
        return f"{self.writer}, {self.file} ({self.releases})"


_ID = re.compile(r"^[a-z0-9]+(?:[-.][a-z0-9]+)*$")
_FIGURE = re.compile(r"^(?:_|[a-z][a-z0-9_]*)$")
_REQUIRED = ("id", "event", "template", "style", "figures", "file", "releases", "level")
_OPTIONAL = ("note", "prefix")


def default_statements_dir() -> Path:
    """The built-in catalogue: ``statements/`` beside the package in a clone, packaged in a wheel."""
    return shipped_folder("statements")


@cache
def builtin_catalogue() -> tuple[Statement, ...]:
    return load_catalogue(default_statements_dir())


@cache
def figure_names() -> frozenset[str]:
    """Every figure the built-in catalogue names: the fields its events may carry beyond the registry's
    (diagnose/dump/registry.py)."""
    return frozenset(f for statement in builtin_catalogue() for f in statement.figures if f != "_")


def load_catalogue(folder: Path) -> tuple[Statement, ...]:
    statements: list[Statement] = []
    seen: dict[str, str] = {}
    for path in sorted(folder.glob("*.yaml")):
        for statement in load_statements_file(path):
            if statement.id in seen:
                raise CatalogueError(
                    f"{path.name}: statement {statement.id!r} is also in {seen[statement.id]}"
                )
            seen[statement.id] = path.name
            statements.append(statement)
    return tuple(statements)


def load_statements_file(path: Path) -> list[Statement]:
    """One writer's statements (``statements/WRITER.yaml``)."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        raise CatalogueError(f"{path}: not a readable YAML file ({error})") from error
    if not isinstance(data, dict) or not isinstance(data.get("statements"), list):
        raise CatalogueError(f"{path}: expected a mapping with `writer`, `repo` and a `statements` list")
    writer = str(data.get("writer", path.stem))
    return [
        _statement(entry, writer, f"{path.name}: statements[{n}]")
        for n, entry in enumerate(data["statements"])
    ]


def _statement(entry: Any, writer: str, where: str) -> Statement:
    if not isinstance(entry, dict):
        raise CatalogueError(f"{where}: expected a mapping, got {type(entry).__name__}")
    missing = [key for key in _REQUIRED if key not in entry]
    if missing:
        raise CatalogueError(f"{where}: missing {', '.join(missing)}")
    unknown = sorted(set(entry) - set(_REQUIRED) - set(_OPTIONAL))
    if unknown:
        raise CatalogueError(
            f"{where}: unknown {'key' if len(unknown) == 1 else 'keys'} {', '.join(unknown)}"
        )
    ident = str(entry["id"])
    where = f"{where} ({ident})"
    if not _ID.match(ident):
        raise CatalogueError(f"{where}: an id is lower-case words joined by dashes")
    try:
        event = EventKind(str(entry["event"]))
        style = Style(str(entry["style"]))
    except ValueError as error:
        raise CatalogueError(f"{where}: {error}") from error
    figures = entry["figures"] or []
    if not isinstance(figures, list) or not all(isinstance(f, str) and _FIGURE.match(f) for f in figures):
        raise CatalogueError(f"{where}: figures is a list of lower-case names (`_` for one not kept)")
    prefix = entry.get("prefix")
    if prefix is not None and not isinstance(prefix, int):
        raise CatalogueError(f"{where}: prefix is a number of characters")
    try:
        compiled = compile_template(str(entry["template"]), style, prefix)
    except TemplateError as error:
        raise CatalogueError(f"{where}: {error}") from error
    if len(figures) != len(compiled.kinds):
        raise CatalogueError(
            f"{where}: its template has {counted(len(compiled.kinds), 'placeholder')} and figures names "
            f"{len(figures)}"
        )
    return Statement(
        id=ident,
        writer=writer,
        event=event,
        template=" ".join(str(entry["template"]).split()),
        style=style,
        figures=tuple(figures),
        file=str(entry["file"]),
        releases=str(entry["releases"]),
        level=str(entry["level"]),
        compiled=compiled,
        note=str(entry.get("note", "")),
    )
