"""Reading dumps: the folder format every other stage consumes.

The names below load on first use (PEP 562), so a module that needs only the
format's constants (``diagnose.dump.schema``: the recorder, the flight
recorder's triggers, the CLI's help) does not load pandas.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "Dump": "diagnose.dump.model",
    "Manifest": "diagnose.dump.model",
    "load_dump": "diagnose.dump.reader",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'diagnose.dump' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value
