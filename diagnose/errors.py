"""The errors diagnose raises, written for the person at the terminal.

    DiagnoseError
    ├── InputError        unusable input: a dump, a file, an argument (exit 2)
    │   ├── DumpError     the dump folder as a whole cannot be analysed
    │   ├── PullError     a Prometheus API could not be read, or refused the query
    │   ├── LoadError     the service under load did not answer as a load run needs
    │   └── ArchiveError  the performance archive cannot be used as it is
    ├── RuleError         a rule file is invalid (exit 2)
    ├── CatalogueError    a statements file (statements/) is invalid (exit 2)
    └── DiskFull          the disk filled while recording; the dump keeps what was written (exit 2)

Every error a user may see is one of these. A few exceptions are a module's own way of saying
"this part failed, carry on without it" and never leave it: ``TableReadError`` (one table of a
dump, said as a warning), ``NvmlUnavailable`` (no GPU to read), ``ExpressionError`` and
``TemplateError`` (raised again as a ``RuleError`` naming the file and field).

An ``OSError`` escaping the CLI (a folder that does not exist, no permission,
a full disk) is the environment's, not a bug: exit 2 with the path and the
reason. Ctrl-C exits 130. Anything else escaping the CLI is a bug and exits 3.
The exit codes live in one place, :class:`ExitCode`.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    FINDING_AT_THRESHOLD = 1
    BAD_INPUT = 2
    INTERNAL_ERROR = 3
    INTERRUPTED = 130  # the shell's convention for a command stopped by Ctrl-C (128 + SIGINT)
    READER_GONE = 141  # the pipe's reader went away (diagnose ... | head): 128 + SIGPIPE, said by no message


class DiagnoseError(Exception):
    """Base class: the message is one line a user can act on."""

    exit_code = ExitCode.BAD_INPUT


class InputError(DiagnoseError):
    """A file or argument the user gave cannot be used."""


class DumpError(InputError):
    """The dump folder holds nothing that can be analysed."""


class PullError(InputError):
    """The server could not be read, or refused the query; the message says which and why."""


class LoadError(InputError):
    """The target of ``diagnose load`` did not answer as the run needs; the message says what it answered."""


class ArchiveError(InputError):
    """The archive cannot be used as it is: the message names the file and what to do."""


class DiskFull(DiagnoseError):
    """The disk filled up; the recording stops cleanly with what it has."""


class CatalogueError(DiagnoseError):
    """A catalogue file (statements/ or metrics/) breaks its format; the message names the file and entry."""


class RuleError(DiagnoseError):
    """A rule file is invalid; the message names the file, the rule and the field."""

    def __init__(self, file: str, rule: str | None, field: str | None, problem: str) -> None:
        self.file, self.rule, self.field, self.problem = file, rule, field, problem
        where = file
        if rule:
            where += f": rule {rule}"
        if field:
            where += f": {field}"
        super().__init__(f"{where}: {problem}")
