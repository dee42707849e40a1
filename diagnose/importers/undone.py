"""What mending a paste undid, said in words with its count kept apart (see :class:`Undone`)."""

from __future__ import annotations

from diagnose.units import counted


class Undone(str):
    """What was undone, in words ("removed 3 shell prompt lines"), with its count kept apart: a file read
    in pieces says each kind once, the pieces' counts added up and its noun as the sum asks."""

    number: int
    kind: tuple[str, str, str | None, str]  # the words before the count, the noun, its plural, the rest

    def __new__(
        cls, before: str, number: int, noun: str, after: str = "", plural: str | None = None
    ) -> Undone:
        said = super().__new__(cls, f"{before}{counted(number, noun, plural)}{after}")
        said.number, said.kind = number, (before, noun, plural, after)
        return said

    def __reduce__(self) -> tuple[type[Undone], tuple[str, int, str, str, str | None]]:
        before, noun, plural, after = self.kind  # a copy is made again from its parts
        return Undone, (before, self.number, noun, after, plural)

    def plus(self, other: Undone) -> Undone:
        """The same kind of damage, the other piece's count added."""
        before, noun, plural, after = self.kind
        return Undone(before, self.number + other.number, noun, after, plural)
