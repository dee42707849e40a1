from __future__ import annotations

import json
from pathlib import Path

import pytest

from diagnose.cli import main

ROOT = Path(__file__).resolve().parents[1]
DUMPS = ROOT / "fixtures" / "dumps"
SHARED_DATA = ROOT.parent / "shared" / "data"


@pytest.fixture
def run_cli(capsys):
    """Run the CLI in-process; returns (exit code, stdout, stderr)."""

    def run(*args: str) -> tuple[int, str, str]:
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return int(code), out, err

    return run


@pytest.fixture
def report_of(run_cli):
    """The JSON report of a dump, asserting the analysis itself succeeded."""

    def report(dump: Path, *extra: str) -> dict:
        code, out, err = run_cli("file", dump, "--format", "json", *extra)
        assert code == 0, err
        return json.loads(out)

    return report
