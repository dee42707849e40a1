"""A package's names loaded on first use (PEP 562): importing one module of it does not load the rest."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable


def lazy_exports(package: str, exports: dict[str, str]) -> Callable[[str], object]:
    """The package's module ``__getattr__``: ``exports`` maps each name to the module that defines it."""

    def __getattr__(name: str) -> object:  # noqa: N807 - the module-level hook PEP 562 names
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(exports[name]), name)
        setattr(sys.modules[package], name, value)  # looked up once
        return value

    return __getattr__
