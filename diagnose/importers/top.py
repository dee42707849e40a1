"""``top`` in batch mode as pasted (procps) -> the ``system`` and ``processes`` tables.

Each screen (``top -b``; ``-d`` seconds apart, ``-n`` of them) is a summary area and a task table, as
procps's manual lays them out:

- ``top - 10:00:00 up 1 day,  2:03,  1 user,  load average: 0.52, 0.58, 0.59``: the screen's clock (on
  the file's date, in the server's zone) and the load average (``load1``); a screen pasted from its
  ``Tasks:`` line on is taken at the file's modification time;
- ``Tasks: 250 total,   3 running, ...`` (``Threads:`` with ``-H``): the tasks running (``procs_running``);
- ``%Cpu(s):  5.0 us,  2.0 sy, ... 92.0 id,  1.0 wa, ...`` (``Cpu(s):`` before procps 3.3.10): ``cpu_pct``
  as 100 - idle - I/O wait (as psutil counts it), ``cpu_system_pct`` the ``sy`` share;
- ``MiB Mem : total, free, used, buff/cache`` and ``MiB Swap: total, free, used. avail Mem`` (``KiB``,
  ``GiB`` ... by ``-E``; ``Mem:``/``Swap:`` with ``k`` suffixes before 3.3.10): ``mem_total_bytes``,
  ``mem_used_bytes``, ``swap_used_bytes``;
- the task table, its columns by the header's names (``PID``, ``RES``, ``%CPU``, ``COMMAND`` ...): a
  ``processes`` row for each task, ``RES`` in KiB unless suffixed (``m``, ``g``, ``t``; ``-e``).

One screen has no rates: the swap it shows is in use, not in motion; several screens show it grow.
Each task's ``%CPU`` is kept as top printed it (100 = one core).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pandas as pd

from diagnose.importers.base import Claim, Imported, Importer, Source, header_claim, local_epoch, zone_note

_HEAD = re.compile(r"^top - (\d{1,2}:\d{2}:\d{2}) up .*?load average: ([\d.]+)")
_TASKS = re.compile(r"^(?:Tasks|Threads):\s*\d+ total,\s*(\d+) running")
_CPU = re.compile(r"^%?Cpu\(s\):(.*)$")
_CPU_FIELD = re.compile(r"([\d.]+)[%\s]*(us|sy|ni|id|wa|hi|si|st)\b")
_MEMORY = re.compile(r"^(?:(KiB|MiB|GiB|TiB|PiB|EiB) )?(Mem|Swap)\s*:(.*)$")
_MEMORY_FIELD = re.compile(r"([\d.]+)k?\+?\s*(total|free|used|buff/cache|buffers|avail Mem|cached)")
_SCALES = {None: 1024, "KiB": 1024, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "PiB": 2**50, "EiB": 2**60}
_SUFFIXES = {"k": 1024, "m": 2**20, "g": 2**30, "t": 2**40, "p": 2**50, "e": 2**60}
_TABLE_HEADER = re.compile(r"^\s*PID\s+USER\b.*\bCOMMAND\s*$")


class TopImporter(Importer):
    name = "top"
    description = "`top -b` screens (procps): load, tasks running, CPU, memory and swap, and each task's row"

    def recognise(self, head: str) -> Claim | None:
        if not any(_CPU.match(line.strip()) for line in head.splitlines()):
            return None
        return header_claim(head, lambda line: _HEAD.match(line.strip()) or _TASKS.match(line.strip()))

    def read(self, source: Source, tz: str | None = None) -> Imported:
        result = Imported()
        day = datetime.fromtimestamp(source.mtime, UTC).strftime("%Y-%m-%d")
        screens: list[dict] = []
        processes: list[dict] = []
        columns: list[str] | None = None
        for raw in source.lines():
            line = raw.strip()
            if head := _HEAD.match(line):
                clock = local_epoch(f"{day} {head.group(1)}", tz)
                screens.append({"ts": clock, "load1": float(head.group(2))})
                columns = None
                continue
            tasks = _TASKS.match(line)
            if tasks and (not screens or "procs_running" in screens[-1]):  # a screen pasted from its tasks
                screens.append({"ts": source.mtime})
                columns = None
            if not screens:
                continue
            screen = screens[-1]
            if tasks:
                screen["procs_running"] = float(tasks.group(1))
            elif cpu := _CPU.match(line):
                shares = {name: float(value) for value, name in _CPU_FIELD.findall(cpu.group(1))}
                if "id" in shares:
                    screen["cpu_pct"] = max(0.0, 100.0 - shares["id"] - shares.get("wa", 0.0))
                if "sy" in shares:
                    screen["cpu_system_pct"] = shares["sy"]
            elif memory := _MEMORY.match(line):
                _memory(screen, memory)
            elif _TABLE_HEADER.match(line):
                columns = line.split()
            elif columns is not None and (task := _task(line, columns, screen["ts"])):
                processes.append(task)
        if not screens:
            return result
        result.tables["system"] = pd.DataFrame(screens)
        if processes:
            result.tables["processes"] = pd.DataFrame(processes)
        if any(screen["ts"] == source.mtime for screen in screens):
            result.warnings.append(
                "a screen pasted without top's first line: taken at the file's modification time"
            )
        else:
            result.warnings.append(zone_note("top's clock times", tz))
        return result


def _memory(screen: dict, memory: re.Match[str]) -> None:
    scale = _SCALES[memory.group(1)]
    figures = {name: float(value) * scale for value, name in _MEMORY_FIELD.findall(memory.group(3))}
    if memory.group(2) == "Mem":
        if "total" in figures:
            screen["mem_total_bytes"] = figures["total"]
        if "used" in figures:
            screen["mem_used_bytes"] = figures["used"]
    elif "used" in figures:
        screen["swap_used_bytes"] = figures["used"]


def _task(line: str, columns: list[str], ts: float) -> dict | None:
    """A task's row: its cells by the header's names (the command, last, may hold spaces)."""
    cells = line.split(None, len(columns) - 1)
    if len(cells) != len(columns) or not cells[0].isdigit():
        return None
    by_name = dict(zip(columns, cells, strict=True))
    row: dict = {"ts": ts, "pid": int(by_name["PID"]), "name": by_name.get("COMMAND", "").strip()}
    if (cpu := _number(by_name.get("%CPU"))) is not None:
        row["cpu_pct"] = cpu
    if (resident := _size(by_name.get("RES"))) is not None:
        row["rss_bytes"] = resident
    return row


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def _size(text: str | None) -> float | None:
    """``RES`` as top writes it: KiB, or scaled with a suffix (``2.0g``, ``512m``)."""
    if not text:
        return None
    suffix = text[-1].lower()
    if suffix in _SUFFIXES:
        figure = _number(text[:-1])
        return None if figure is None else figure * _SUFFIXES[suffix]
    figure = _number(text)
    return None if figure is None else figure * 1024
