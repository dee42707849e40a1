"""How numbers read to people: milliseconds, bytes and shares, one way everywhere."""

from __future__ import annotations

import re

from diagnose.errors import InputError


def human_ms(value: float | None) -> str:
    if value is None:
        return "-"
    if abs(value) < 1:
        return f"{value:.2f} ms" if value else "0 ms"
    if value >= 10_000:
        return f"{value / 1000:.1f} s"
    if value >= 100:
        return f"{value:,.0f} ms"
    return f"{value:.1f} ms"


def human_us(value: float) -> str:
    """A GPU kernel's or a runtime call's time: microseconds up to a millisecond, then as ``human_ms``."""
    if abs(value) >= 1000:
        return human_ms(value / 1000)
    return f"{value:.1f} µs" if abs(value) < 10 else f"{value:.0f} µs"


def human_rate(value: float) -> str:
    """Requests or items a second: one decimal and thousands separated, never an exponent."""
    return f"{value:,.1f}/s"


def human_bytes(value: float) -> str:
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(value) >= size:
            return f"{value / size:.2f} {unit}"
    return f"{value:.0f} B"


def human_measure(value: float, unit: str) -> str | None:
    """A time, a size or a rate in its unit's one form (``ms``, ``us``, ``bytes``, ``rps``); None for a
    unit whose form depends on where it is shown (a share, a count)."""
    form = {"ms": human_ms, "us": human_us, "bytes": human_bytes, "rps": human_rate}.get(unit)
    return form(value) if form is not None else None


def percent(share: float | None) -> str:
    return "-" if share is None else f"{share * 100:.0f}%"


_DURATION = re.compile(r"^\s*(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m)?\s*(?:(\d+(?:\.\d+)?)s?)?\s*$")


def parse_duration(text: str) -> float:
    """``"15m"``, ``"1h30m"``, ``"90s"`` or ``"90"`` -> seconds."""
    match = _DURATION.match(text or "")
    if not match or not any(match.groups()):
        raise InputError(f"expected a duration such as 90s, 15m or 1h30m, got {text!r}")
    hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    total = hours * 3600 + minutes * 60 + seconds
    if total <= 0:
        raise InputError(f"the duration must be positive, got {text!r}")
    return total


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """``"512M"``, ``"2G"``, ``"1.5GiB"`` or ``"4096"`` -> bytes (K, M, G, T are powers of 1024)."""
    match = _SIZE.match(text or "")
    if not match:
        raise InputError(f"expected a size such as 512M, 2G or 1.5GiB, got {text!r}")
    size = float(match.group(1)) * 1024 ** "_kmgt".index(match.group(2).lower() or "_")
    if size < 1:
        raise InputError(f"the size must be positive, got {text!r}")
    return int(size)


def counted(count: float, noun: str, plural: str | None = None) -> str:
    """A count with its noun, singular or plural as the count asks: "1 GPU", "3 GPUs", "1,204 lines"
    (``plural`` where adding an s is not it: "process", "processes")."""
    whole = int(count) if float(count).is_integer() else count
    word = noun if whole == 1 else (plural or f"{noun}s")
    return f"{whole:,} {word}"
