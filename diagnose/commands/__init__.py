"""The sub-commands of ``diagnose``, one module each.

Each module has ``add_parser(commands)``, which adds the command and its options and sets
``handler=run``, and ``run(args) -> int``, which returns an :class:`~diagnose.errors.ExitCode`.
They import only the standard library and :mod:`diagnose.errors` at the top: the analysis stack
is imported inside ``run``, so that ``--help`` and argument errors answer at once.
"""

from __future__ import annotations

from diagnose.commands import (
    alerts,
    archive,
    compare,
    file,
    fleet,
    formats,
    live,
    load,
    pull,
    record,
    rules,
    serve,
    verify,
)

COMMANDS = (
    file,
    compare,
    archive,
    record,
    live,
    verify,
    load,
    pull,
    fleet,
    serve,
    alerts,
    formats,
    rules,
)  # in the order --help lists them
