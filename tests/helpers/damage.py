"""What happens to evidence on its way into an incident, as operators on text, and the verdict on each.

Each operator does to a clean sample what a terminal, a chat box, a log
shipper or a Markdown page does to it: a process tag before every line, an
indent, HTML entities, Markdown escapes, a code fence, a shell prompt, CRLF,
colour codes, curl's progress meter, a tmux indicator, a hard wrap, lines
glued together, a start or an end cut off. ``verdict`` reads the damaged text
as ``diagnose file`` would (mend, recognise, read) and compares the rows with
the clean sample's: the same rows, fewer (figures the damage destroyed), none
(a clean refusal), or different ones, which is the only wrong answer besides
an exception.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from diagnose.importers import Source, mend, recognise

MTIME = 1_764_000_000.0  # one modification time for clean and damaged alike: rows timed by it compare
# Columns that say where a row came from rather than what it is: they move when lines are added.
_PLACE = {"line", "message", "source_line"}
# Formats with no clock of their own: rows are timed back from the file's end a second apart, so a
# cut moves every row's time; their figures are compared, their times are not.
_TIMED_FROM_END = {"nvidia-smi-dmon", "nvidia-smi-pmon"}


@dataclass(frozen=True)
class Damage:
    name: str
    apply: Callable[[str], str]
    reversible: bool  # mend must give the clean rows back, not fewer


def _per_line(prefix: str) -> Callable[[str], str]:
    return lambda text: "\n".join(prefix + line if line else line for line in text.split("\n"))


def _tagged(text: str) -> str:
    """Process tags as vLLM V1 and Ray write them, two processes taking turns (names that say no engine)."""
    tags = ("(Worker_TP0 pid=41233) ", "(ApiServer pid=41190) ")
    return "\n".join(tags[i % 2] + line for i, line in enumerate(text.split("\n")))


def _wrapped(width: int) -> Callable[[str], str]:
    def wrap(text: str) -> str:
        out = []
        for line in text.split("\n"):
            out.extend(line[i : i + width] for i in range(0, max(len(line), 1), width))
        return "\n".join(out)

    return wrap


def _glued(every: int) -> Callable[[str], str]:
    def glue(text: str) -> str:
        lines = text.split("\n")
        out: list[str] = []
        for index, line in enumerate(lines):
            if out and index % every == 0 and line.strip() and out[-1].strip():
                out[-1] += line
            else:
                out.append(line)
        return "\n".join(out)

    return glue


def _curl(text: str) -> str:
    meter = (
        "  % Total    % Received % Xferd  Average Speed   Time    Time     Time  Current\n"
        "                                 Dload  Upload   Total   Spent    Left  Speed\n"
    )
    lines = text.split("\n")
    middle = len(lines) // 2
    row = "100 12845  100 12845    0     0   627k      0 --:--:-- --:--:-- --:--:--  627k"
    lines[middle] = row + lines[middle]  # the meter's last redraw, glued to the scrape's line
    return meter + "\n".join(lines)


def _coloured(text: str) -> str:
    return "\n".join(f"\x1b[32m{line}\x1b[0m" if line else line for line in text.split("\n"))


def _tmux(text: str) -> str:
    first, _, rest = text.partition("\n")
    return f"{first}     [0/214]\n{rest}"


def _cut(start: bool, share: float) -> Callable[[str], str]:
    def cut(text: str) -> str:
        at = int(len(text) * share)
        return text[at:] if start else text[: len(text) - at]

    return cut


DAMAGES: tuple[Damage, ...] = (
    Damage("vllm-process-tags", _tagged, True),
    Damage("ray-worker-tag", _per_line("(RayWorkerWrapper pid=5123, ip=10.0.3.7) "), True),
    Damage("compose-prefix", _per_line("infer-server-1  | "), True),
    Damage("kubectl-prefix", _per_line("[pod/infer-0/server] "), True),
    Damage("markdown-quote", _per_line("> "), True),
    Damage("indent-4", _per_line("    "), True),
    Damage("indent-tab", _per_line("\t"), True),
    Damage("html-entities", lambda text: html.escape(text, quote=True), True),
    Damage("markdown-escapes", lambda text: text.replace("_", "\\_").replace("*", "\\*"), True),
    Damage("code-fence", lambda text: f"```text\n{text}\n```\n", True),
    Damage("shell-prompt", lambda text: f"user@gpu-node-3:~$ cat evidence.txt\n{text}", True),
    Damage("crlf", lambda text: text.replace("\n", "\r\n"), True),
    Damage("colour-codes", _coloured, True),
    Damage("curl-meter", _curl, True),
    Damage("tmux-indicator", _tmux, True),
    Damage("wrap-80", _wrapped(80), False),
    Damage("wrap-120", _wrapped(120), False),
    Damage("wrap-200", _wrapped(200), False),
    Damage("glued-every-7", _glued(7), False),
    Damage("cut-start-30pct", _cut(True, 0.3), False),
    Damage("cut-end-30pct", _cut(False, 0.3), False),
)
BY_NAME = {damage.name: damage for damage in DAMAGES}


def rows(text: str, name: str) -> tuple[str | None, dict[str, list[tuple]]]:
    """The importer that reads ``text`` and its rows per table, as ``diagnose file`` would read it."""
    mended = mend(text)
    importer = recognise(mend(text[:65_536]).text)
    if importer is None:
        return None, {}
    result = importer.read(Source(name, mended.text, MTIME, mended.undone, mended.prefixes))
    untimed = importer.name in _TIMED_FROM_END
    return importer.name, {
        table: _row_set(frame.drop(columns=["ts"]) if untimed else frame)
        for table, frame in result.tables.items()
        if len(frame)
    }


def _row_set(frame) -> list[tuple]:
    """The rows as sorted ``(column, value)`` pairs, without the missing values."""
    columns = sorted(c for c in frame.columns if c not in _PLACE)
    messages = frame["message"] if "message" in frame.columns else [None] * len(frame)
    found = []
    for values, message in zip(frame[columns].itertuples(index=False), messages, strict=True):
        pairs = tuple((c, _value(v)) for c, v in zip(columns, values, strict=True))
        # a time that fell back to the file's (its stamp was cut off) is a figure lost, not a wrong one
        if ("ts", MTIME) in pairs:
            pairs = tuple(p for p in pairs if p[0] not in ("ts", "ts_source"))
        kept = tuple(p for p in pairs if p[1] is not None)
        # an OOM the damage left "unknown" (its figures cut away) has lost its verdict, not misread it
        if dict(kept).get("oom_class", "").startswith("unknown"):
            kept = tuple(p for p in kept if p[0] not in ("oom_class", "oom_reason"))
        if "oom_reason" in dict(kept):  # a reason is its figures, compared with the message's
            kept = tuple((c, _sizes(v) if c == "oom_reason" else v) for c, v in kept)
            kept += (("oom_figures", _sizes(message if isinstance(message, str) else "")),)
        found.append(tuple(sorted(kept)))
    return sorted(found, key=repr)


_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*(TiB|GiB|MiB|KiB|TB|GB|MB|KB|bytes|B)\b")
_BYTES = {"b": 1, "bytes": 1, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_BYTES |= {"kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}


def _sizes(text: str) -> tuple[float, ...]:
    """The sizes a text states, in bytes to three figures: "0.98 GiB" and "1000.00 MiB" alike."""
    return tuple(sorted({float(f"{float(n) * _BYTES[unit.lower()]:.3g}") for n, unit in _SIZE.findall(text)}))


def _within(row: tuple, clean: tuple) -> bool:
    """Whether every figure of ``row`` is ``clean``'s: a reason may cite fewer of the message's sizes
    (its other figures were cut away), a cut message states fewer of them, and a verdict may be the
    family of the clean one ("exhaustion" for "exhaustion: the serving engine's ...") where the cut
    took away what told which."""
    stated = dict(clean)
    for column, value in row:
        if column == "oom_class" and str(stated.get(column, "")).startswith(f"{value}: "):
            continue
        if column == "oom_reason":
            if not set(value) <= {*stated.get("oom_reason", ()), *stated.get("oom_figures", ())}:
                return False
        elif column == "oom_figures":
            if not set(value) <= set(stated.get("oom_figures", ())):
                return False
        elif stated.get(column, _MISSING) != value:
            return False
    return True


_MISSING = object()


def _value(value):
    if isinstance(value, float):
        return None if math.isnan(value) else round(value, 6)
    return None if pd.isna(value) else value  # NaN / NaT / pd.NA as None


def verdict(clean: tuple[str | None, dict], damaged_text: str, name: str) -> str:
    """``same``, ``fewer``, ``refused``, ``different`` or ``error: ...`` for one damaged text.

    ``fewer``: every row read is one of the clean rows, or one with figures missing from it. Which
    importer read it does not matter, what it read does: a cut that leaves a vLLM log's OOM message
    and none of its log lines is an OOM message, read as one.
    """
    _, tables = clean
    try:
        _, damaged = rows(damaged_text, name)
    except Exception as error:  # noqa: BLE001 - an escape is what the suite looks for
        return f"error: {type(error).__name__}: {error}"
    if not damaged:
        return "refused"
    if damaged == tables:
        return "same"
    for table, found in damaged.items():
        expected = list(tables.get(table, []))
        for row in found:
            match = next((clean_row for clean_row in expected if _within(row, clean_row)), None)
            if match is None:
                return "different"
            expected.remove(match)
    return "fewer"
