"""NVIDIA Xid errors in kernel logs (dmesg plain, ``-T``, ISO, journal) -> ``xid`` events.

Each event carries the Xid code, what it means and whether it is fatal to
serving (the GPU or its context must be reset). Wall-clock stamps are used
when the line has one; dmesg's plain stamp is seconds since boot, so such
events take the file's modification time.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pandas as pd

from diagnose.importers.base import Claim, Imported, Importer, Source, Strength, claim
from diagnose.importers.stamps import kernel_stamp

_XID = re.compile(r"NVRM: Xid \((?:PCI:)?([^)]*)\): (\d+)(?:, pid=(\d+))?(?:, name=([^,]+))?")
_OFF_BUS = re.compile(r"fallen off the bus")

# code -> (meaning, fatal to serving)
XID_MEANINGS: dict[int, tuple[str, bool]] = {
    13: ("graphics engine exception (often an application bug: out-of-range access)", False),
    31: ("GPU memory page fault (MMU fault), usually an application bug", False),
    32: ("invalid or corrupted push buffer stream", False),
    43: ("GPU stopped processing (the context was killed)", False),
    45: ("preemptive cleanup of channels, after an earlier error", False),
    48: ("double-bit ECC error: uncorrectable memory error", True),
    61: ("internal micro-controller breakpoint/warning", False),
    62: ("internal micro-controller halt", True),
    63: ("ECC page retirement or row remapping recorded", False),
    64: ("ECC page retirement or row remapping failed", True),
    74: ("NVLink error", True),
    79: ("GPU has fallen off the bus", True),
    92: ("high single-bit ECC error rate", False),
    94: ("contained ECC error: the affected application must restart", False),
    95: ("uncontained ECC error: the GPU must be reset", True),
    119: ("GSP RPC timeout", True),
    120: ("GSP error", True),
    144: ("NVLink/NETIR error", True),
    145: ("NVLink/NETIR error", True),
    149: ("NVLink/NETIR fatal error", True),
}


# A kernel log's line: dmesg's "[31543.449443] ", a journal's or syslog's "kernel: ", or the driver's "NVRM:"
_KERNEL_LINE = re.compile(r"^\s*\[\s*\d+\.\d+\]|\bkernel: |NVRM:")


class XidImporter(Importer):
    name = "kernel-xid"
    description = "NVIDIA Xid errors and 'fallen off the bus' in dmesg, dmesg -T, ISO or journal kernel logs"

    def recognise(self, head: str) -> Claim | None:
        if not ("NVRM: Xid" in head or ("NVRM:" in head and "fallen off the bus" in head)):
            return None
        return claim(Strength.STATEMENT, sum(1 for line in head.splitlines() if _KERNEL_LINE.search(line)))

    def read(self, source: Source, tz: str | None = None) -> Imported:
        fallback = source.mtime
        year = datetime.fromtimestamp(fallback, UTC).year
        events = []
        for number, line in enumerate(source.lines(), start=1):
            match = _XID.search(line)
            if match:
                code = int(match.group(2))
                meaning, fatal = XID_MEANINGS.get(code, ("see NVIDIA's Xid catalogue", False))
                event = {
                    "kind": "xid",
                    "xid": code,
                    "device": match.group(1),
                    "meaning": meaning,
                    "fatal": fatal,
                    "message": line.strip(),
                    "line": number,
                }
                if match.group(3):
                    event["pid"] = int(match.group(3))
                if match.group(4):
                    event["process"] = match.group(4).strip()
            elif _OFF_BUS.search(line):
                event = {
                    "kind": "xid",
                    "xid": 79,
                    "device": None,
                    "meaning": XID_MEANINGS[79][0],
                    "fatal": True,
                    "message": line.strip(),
                    "line": number,
                }
            else:
                continue
            ts = kernel_stamp(line, year, tz)
            event["ts"], event["ts_source"] = (
                (ts, "log line") if ts is not None else (fallback, "file modification time")
            )
            events.append(event)
        return Imported({"events": pd.DataFrame(events)} if events else {})
