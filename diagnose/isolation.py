"""One part of the analysis that fails on odd evidence must not take the rest down with it.

Dumps are assembled from whatever people had: files cut short, columns half
empty, tables from different machines. Each stage that reads one piece of
evidence (an importer, a family of facts, one signal's spike search) runs
through :func:`isolated`: an exception there becomes a warning that names the
piece and the error, and the analysis goes on without it. The warning says it
is a bug, because it is one: odd data should be handled, not survived.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def isolated(warnings: list[str], what: str, call: Callable[[], T]) -> T | None:
    """``call()``, or None with a warning naming ``what`` when it raises."""
    try:
        return call()
    except Exception as error:  # noqa: BLE001 - the point of this module; the warning names it
        warnings.append(
            f"{what}: left out after an internal error ({type(error).__name__}: {error}); "
            "the rest was analysed. This is a bug: please report it with this line"
        )
        return None
