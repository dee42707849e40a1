"""Every real field sample, alone or all together, is analysed end to end into what it must yield.

The importer tests check what each sample reads as; these check that the whole pipeline (reader,
facts, spikes, rules, report) turns a folder holding one pasted file, the commonest dump there is,
into a report whose evidence names that file's importer, or refuses it with the reason a user can act
on (tests/helpers/samples.py declares which samples are refused, and why).
"""

from __future__ import annotations

import json
import shutil

import pytest

from tests.helpers.samples import REAL, expectation

SETS = ("formats", "field-2026-12")
pytestmark = pytest.mark.skipif(not REAL.is_dir(), reason="../shared/data/real-samples is not here")


def _files(kind_set: str) -> list:
    root = REAL / kind_set
    if not root.is_dir():
        return []
    return sorted(
        path for path in root.rglob("*") if path.is_file() and path.name not in ("README.md", "SOURCES.tsv")
    )


def _name(path) -> str:
    return "_".join(path.relative_to(REAL).parts)


@pytest.mark.parametrize("sample", [p for s in SETS for p in _files(s)], ids=_name)
def test_each_sample_alone_yields_its_importers_rows_or_a_clean_refusal(run_cli, tmp_path, sample):
    importers, outcome = expectation(sample)
    shutil.copy(sample, tmp_path / sample.name)
    code, out, err = run_cli("file", tmp_path, "--format", "json")
    assert "bug" not in err, err
    if outcome == "unread":
        assert code == 2 and "no tables found" in err, err
    elif outcome == "nothing to keep":
        assert code == 2 and f"recognised {sample.name} (as " in err and "no rows came of it" in err, err
    else:
        assert code == 0, err
        used = [e for e in json.loads(out)["evidence"]["importers"] if e["file"] == sample.name]
        assert used and used[0]["importer"] in importers and used[0]["rows"] > 0, (used, importers)


def test_both_sample_sets_together_in_one_folder_are_analysed(run_cli, tmp_path):
    samples = [p for s in SETS for p in _files(s)]
    for sample in samples:
        shutil.copy(sample, tmp_path / _name(sample))
    code, out, err = run_cli("file", tmp_path, "--format", "json")
    assert code == 0 and "bug" not in err, err
    report = json.loads(out)
    read = {e["file"] for e in report["evidence"]["importers"] if e["rows"]}
    yielding = {_name(p) for p in samples if expectation(p)[1] == "rows"}
    assert yielding <= read, sorted(yielding - read)
    assert any("spans" in w and "days" in w for w in report["evidence"]["warnings"])
