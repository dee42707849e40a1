from __future__ import annotations

import json
import os
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
