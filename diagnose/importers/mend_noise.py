"""Lines no format wrote, in a paste: shell prompts and their commands, curl's progress meter, tmux's
scroll indicator; and the header an nvidia-smi query turned off, put back from its command line.

One step of :func:`~diagnose.importers.mend.mend`, kept apart as mend_csv.py is: what a terminal adds
around a tool's output, not what the tool wrote.
"""

from __future__ import annotations

import re

from diagnose.importers.undone import Undone

# A shell prompt and the command after it: "$ nvidia-smi", "root@gpu-3:~# curl ...", "PS C:\> nvidia-smi"
PROMPT = re.compile(
    r"^\s*(?:\([\w.-]+\)\s+)?"
    r"(?:[\w.-]+@[\w.-]+(?::[^\s$#]*)?\s?[$#%]|\[[\w.-]+@[\w.-]+[^\]]*\]\s?[$#]|\$"
    r"|PS [A-Za-z]:\\[^>]*>|[A-Z]:\\[^>]*>)"
    r"\s+\S"
)
# nvidia-smi's query with its header turned off (--format=csv,noheader): the command names the columns,
# in order, as the header would have (nvidia-smi --help-query-gpu); the header is put back in its place.
_NOHEADER_QUERY = re.compile(
    r"nvidia-smi\b[^\n]*?--query-(?:gpu|compute-apps)[= ]([\w.,]+)[^\n]*?--format[= ]([\w,]*noheader[\w,]*)"
)
# curl's progress meter (stderr, captured with 2>&1): its two header lines and its rows.
_SIZE = r"[\d.]+[kMGT]?"
_TIME = r"(?:--:--:--|\d+:\d\d:\d\d|\d+d \d\dh|\d+h \d\dm)"
_CURL_ROW = re.compile(
    rf"^\s*\d{{1,3}}\s+{_SIZE}\s+\d{{1,3}}\s+{_SIZE}\s+\d{{1,3}}\s+{_SIZE}\s+{_SIZE}\s+{_SIZE}"
    rf"\s+{_TIME}\s+{_TIME}\s+{_TIME}\s+{_SIZE}"
)
_CURL_HEADER = re.compile(r"^\s*% Total\s+% Received % Xferd|^\s*Dload\s+Upload\s+Total\s+Spent")
# What the meter's carriage-return redraws leave before a scrape's comment when the two streams
# interleave: figures, sizes and clock dashes ("--:--100  389k  100  389k    # HELP ...", "0 # TYPE ...").
_METER_DEBRIS = re.compile(r"^[\d\s.:kMGT%-]+?(?=# (?:HELP|TYPE) )")
# tmux copy mode's position indicator, top right of the pane: "[12/340]" at the end of a line.
_TMUX = re.compile(r"\s{2,}\[\d+/\d+\]\s*$")


def without_noise(lines: list[str], undone: list[str], commands: list[str]) -> list[str]:
    """Lines no format wrote: shell prompts (their commands kept in ``commands``), curl's progress meter;
    a tmux indicator's tail."""
    kept, prompts, meter, tmux, headers = [], 0, 0, 0, 0
    for line in lines:
        query = _NOHEADER_QUERY.search(line)
        if query:
            headers += 1
            kept.append(", ".join(field for field in query.group(1).split(",") if field))
            continue
        if (prompt := PROMPT.match(line)) is not None:
            prompts += 1
            commands.append(line[prompt.end() - 1 :].strip())
            continue
        if _CURL_HEADER.match(line):
            meter += 1
            continue
        row = _CURL_ROW.match(line)
        if row:
            meter += 1
            rest = line[row.end() :]
            if not rest.strip():
                continue
            line = rest  # the meter's last redraw glued to the scrape's next line
        debris = _METER_DEBRIS.match(line) if meter else None
        if debris:
            meter += 1
            line = line[debris.end() :]
        line, cut = _TMUX.subn("", line)
        tmux += cut
        kept.append(line)
    for count, what, after in (
        (prompts, "shell prompt line", ""),
        (meter, "line", " of curl's progress meter"),
        (tmux, "tmux scroll indicator", ""),
        (headers, "nvidia-smi command line", " with noheader, put back as the header it names"),
    ):
        if count:
            undone.append(Undone("removed ", count, what, after))
    return kept
