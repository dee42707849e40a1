"""Reading dumps: the folder format every other stage consumes.

The names below load on first use (PEP 562), so a module that needs only the
format's constants (``diagnose.dump.schema``: the recorder, the flight
recorder's triggers, the CLI's help) does not load pandas.
"""

from __future__ import annotations

from diagnose.lazy import lazy_exports

_EXPORTS = {
    "Dump": "diagnose.dump.model",
    "Manifest": "diagnose.dump.model",
    "load_dump": "diagnose.dump.reader",
}

__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
