"""Collectors: sample a live host into a dump (docs/dump-format.md), cheaply.

Each collector returns plain rows (dicts keyed by the dump's column names);
:mod:`diagnose.collectors.recorder` runs them on a drift-free 1 s clock and
:mod:`diagnose.collectors.writer` appends the rows to the dump as it goes.
"""
