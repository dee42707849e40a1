"""Reading dumps: the folder format every other stage consumes.

The names below load on first use (PEP 562), so a module that needs only the
format's constants (``diagnose.dump.schema``: the recorder, the flight
recorder's triggers, the CLI's help) does not load pandas.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from diagnose.lazy import lazy_exports

if TYPE_CHECKING:  # the names as a type checker sees them (``X as X``: re-exported); at run time, __getattr__
    from diagnose.dump.model import (
        Dump as Dump,
        Manifest as Manifest,
    )
    from diagnose.dump.reader import (
        load_dump as load_dump,
    )

_EXPORTS = {
    "Dump": "diagnose.dump.model",
    "Manifest": "diagnose.dump.model",
    "load_dump": "diagnose.dump.reader",
}

__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
