"""What evidence a fact needs, as data: the tables, columns, event kinds and manifest fields it reads.

A rule whose facts are absent says which evidence was missing; two facts that need nested evidence
("server: running" and "server: queue_depth and running") are said once, by the wider. Both come from
this structure, never from the words, and ``tests/test_fact_needs.py`` holds every name in it to the
dump's column registry and documented event kinds, so a fact cannot ask for a column no writer writes.

An item is a table (``requests``), one of its columns (``requests.input_len``; a family by pattern,
``requests.stage_<name>_ms``), an event kind (``events:oom``), a manifest field
(``manifest:slo_p99_ms``) or, for the facts ``diagnose verify`` reads on the live host, its probe
(``live:gpu_clocks``).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product


@dataclass(frozen=True)
class Needs:
    """Any one of ``alternatives`` (each a set of items that must all be there), said as ``text``."""

    alternatives: tuple[frozenset[str], ...]
    text: str

    def within(self, other: Needs) -> bool:
        """Whether evidence enough for ``other`` is enough for this too, and ``other`` asks for more: said
        together, ``other`` says both."""
        return _enough(other, self) and not _enough(self, other)

    def items(self) -> frozenset[str]:
        """Every item any alternative names."""
        return frozenset().union(*self.alternatives)


def table(name: str, where: str | None = None) -> Needs:
    return Needs((frozenset({name}),), _where(name, where))


def columns(table_name: str, *names: str, where: str | None = None) -> Needs:
    """``table: a, b and c (where)``: every column of one table."""
    return Needs(
        (frozenset(f"{table_name}.{n}" for n in names),), _where(f"{table_name}: {_and(names)}", where)
    )


def event(kind: str, where: str | None = None) -> Needs:
    return Needs((frozenset({f"events:{kind}"}),), _where(f"events: {kind}", where))


def manifest(field: str) -> Needs:
    return Needs((frozenset({f"manifest:{field}"}),), f"manifest: {field}")


def every(*needs: Needs, text: str | None = None) -> Needs:
    """All of ``needs``."""
    alternatives = tuple(frozenset().union(*chosen) for chosen in product(*(n.alternatives for n in needs)))
    return Needs(alternatives, text or ", and ".join(n.text for n in needs))


def either(*needs: Needs, text: str | None = None) -> Needs:
    """Any one of ``needs``."""
    return Needs(tuple(a for n in needs for a in n.alternatives), text or ", or ".join(n.text for n in needs))


def said(text: str, needs: Needs) -> Needs:
    """``needs`` in words of their own (where the items alone would not tell a user what to bring)."""
    return Needs(needs.alternatives, text)


def probe(name: str, text: str) -> Needs:
    """What ``diagnose verify``'s probe ``name`` reads on the live host: never in a dump."""
    return Needs((frozenset({f"live:{name}"}),), text)


ANYTHING = Needs((frozenset(),), "any table")


def _enough(given: Needs, wanted: Needs) -> bool:
    """Whether each way of meeting ``given`` also meets ``wanted``."""
    return all(any(want <= have for want in wanted.alternatives) for have in given.alternatives)


def _and(names: tuple[str, ...]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _where(text: str, where: str | None) -> str:
    return f"{text} ({where})" if where else text
