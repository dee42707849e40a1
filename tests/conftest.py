from __future__ import annotations

import functools
import json
import os
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import settings

from diagnose.cli import main

# Property tests explore the same examples on every run: CI must not fail on a new draw.
# benchmarks/bench_fuzz.py is where the wide, random search runs.
settings.register_profile("deterministic", derandomize=True, database=None, print_blob=True)
settings.load_profile("deterministic")

pytest_plugins = ["tests.helpers.service"]  # the loopback service fixture, for the recorder's tests

ROOT = Path(__file__).resolve().parents[1]
DUMPS = ROOT / "fixtures" / "dumps"
SHARED_DATA = ROOT.parent / "shared" / "data"
# Set by .ci/run: there, the real samples and traces must be found, never silently skipped.
REQUIRE_SHARED = "DIAGNOSE_REQUIRE_SHARED"


def pytest_sessionstart(session: pytest.Session) -> None:
    if os.environ.get(REQUIRE_SHARED) and not SHARED_DATA.is_dir():
        raise pytest.UsageError(
            f"{SHARED_DATA} is not here, and {REQUIRE_SHARED} says the tests that read it must run: "
            "CI clones the project beside ../shared (elsewhere those tests skip, saying so)"
        )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files marked ``waits`` first, then the rest by their count of tests, each file's tests together:
    with ``--dist loadfile`` a file is one worker's, and a file of long waits on real servers and loads
    handed out last would keep one worker busy after the others have finished."""
    per_file = Counter(str(item.path) for item in items)
    items.sort(key=lambda item: (not item.get_closest_marker("waits"), -per_file[str(item.path)], str(item.path)))


@pytest.fixture
def run_cli(capsys, monkeypatch):
    """Run the CLI in-process; returns (exit code, stdout, stderr). With no terminal width given: a
    text report is as wide as it is on a machine with no terminal, whoever runs the tests."""
    monkeypatch.delenv("COLUMNS", raising=False)

    def run(*args: str) -> tuple[int, str, str]:
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return int(code), out, err

    return run


_COMMITTED_REPORTS: dict[tuple[str, ...], str] = {}


@pytest.fixture
def report_of(run_cli):
    """The JSON report of a dump, asserting the analysis itself succeeded: exit 0, and no part of it
    left out after an internal error (diagnose/isolation.py's warning, which says "This is a bug").

    A committed fixture is analysed once per test run: its report is the same
    for every test that reads it, and analysing it again only costs time.
    """

    def report(dump: Path, *extra: str) -> dict:
        key = (str(dump), *extra)
        committed = Path(dump).resolve().is_relative_to(DUMPS)
        if not committed or key not in _COMMITTED_REPORTS:
            code, out, err = run_cli("file", dump, "--format", "json", *extra)
            assert code == 0, err
            assert "This is a bug" not in err, err
            if not committed:
                return json.loads(out)
            _COMMITTED_REPORTS[key] = out
        return json.loads(_COMMITTED_REPORTS[key])

    return report


# Every column a writer of this project writes is in the registry (diagnose/dump/registry.py), which
# docs/dump-format.md is held to (tests/test_column_registry.py): each importer's read and each
# recorder's row in the whole suite is checked, and a test whose code wrote an unregistered column fails.
_UNREGISTERED: list[str] = []


def _importer_classes() -> list[type]:
    import diagnose.importers  # noqa: F401 - every importer module, so that every subclass exists
    from diagnose.importers.base import Importer

    found, todo = [], list(Importer.__subclasses__())
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return [cls for cls in found if "read" in vars(cls)]


@functools.cache
def _event_figures() -> frozenset[str]:
    """What an event may carry beyond the registry: its statement's figures, a trigger's signals."""
    from diagnose.collectors.triggers import SIGNALS
    from diagnose.statements import figure_names

    return figure_names() | frozenset(SIGNALS)


def _checked_read(cls: type):
    from diagnose.dump.registry import unregistered

    read = vars(cls)["read"]

    def checked(self, *args, **kwargs):
        imported = read(self, *args, **kwargs)
        for table, frame in imported.tables.items():
            bad = unregistered(table, frame.columns, _event_figures())
            if bad:
                _UNREGISTERED.append(f"{cls.__name__} wrote {table}: {', '.join(bad)}")
        return imported

    return checked


def _checked_append(append):
    from diagnose.collectors.writer import JSONL_TABLES
    from diagnose.dump.registry import unregistered
    from diagnose.dump.schema import COLUMNS

    def checked(self, table, rows):
        keys = sorted({key for row in rows for key in row})
        if table in COLUMNS:  # a CSV table's writer drops what its header lacks: said here, not lost there
            dropped = [key for key in keys if key not in COLUMNS[table]]
            if dropped:
                _UNREGISTERED.append(f"DumpWriter dropped {table}: {', '.join(dropped)}")
        elif table in JSONL_TABLES:
            bad = unregistered(table, keys, _event_figures())
            if bad:
                _UNREGISTERED.append(f"DumpWriter wrote {table}: {', '.join(bad)}")
        return append(self, table, rows)

    return checked


@pytest.fixture(scope="session")
def _registry_watch():
    from diagnose.collectors.writer import DumpWriter

    patch = pytest.MonkeyPatch()
    for cls in _importer_classes():
        patch.setattr(cls, "read", _checked_read(cls))
    patch.setattr(DumpWriter, "append", _checked_append(DumpWriter.append))
    yield
    patch.undo()


@pytest.fixture(autouse=True)
def _columns_registered(_registry_watch, request):
    _UNREGISTERED.clear()
    yield
    if _UNREGISTERED and request.node.get_closest_marker("writes_unregistered") is None:
        found = sorted(set(_UNREGISTERED))
        _UNREGISTERED.clear()
        pytest.fail(
            "columns written but not in diagnose/dump/registry.py (and docs/dump-format.md): "
            + "; ".join(found)
        )
