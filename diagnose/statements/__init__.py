"""Statements: what engines and libraries write about a cause, found on any line of any file.

The catalogue (``statements/``, one YAML file a writer) is read from the writers' own source; the
scanner finds each statement under whatever prefix, wrap or quoting a paste put around it, and makes
it an event of the dump's ``events`` table. See statements/README.md for the format.
"""

from __future__ import annotations

from diagnose.statements.catalogue import (
    EventKind,
    Statement,
    builtin_catalogue,
    default_statements_dir,
    figure_names,
    load_catalogue,
    load_statements_file,
)
from diagnose.statements.scan import Finder, Found, StatementScan, builtin_finder, statement_events

__all__ = [
    "EventKind",
    "Finder",
    "Found",
    "Statement",
    "StatementScan",
    "builtin_catalogue",
    "builtin_finder",
    "default_statements_dir",
    "figure_names",
    "load_catalogue",
    "load_statements_file",
    "statement_events",
]
