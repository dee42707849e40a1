"""How numbers read to people: milliseconds, bytes and shares, one way everywhere."""

from __future__ import annotations


def human_ms(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 10_000:
        return f"{value / 1000:.1f} s"
    if value >= 100:
        return f"{value:,.0f} ms"
    return f"{value:.1f} ms"


def human_bytes(value: float) -> str:
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(value) >= size:
            return f"{value / size:.2f} {unit}"
    return f"{value:.0f} B"


def percent(share: float | None) -> str:
    return "-" if share is None else f"{share * 100:.0f}%"
