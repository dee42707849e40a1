"""Where the data the product ships beside its code is found: ``rules/``, ``statements/``, ``metrics/``."""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def shipped_folder(name: str) -> Path:
    """``name/`` beside the package in a clone (what a contributor edits, and the tests read), else the
    copy a wheel carries as ``diagnose/builtin_<name>`` (pyproject.toml's force-include)."""
    clone = Path(__file__).resolve().parents[1] / name
    if clone.is_dir():
        return clone
    return Path(str(resources.files("diagnose") / f"builtin_{name}"))
