"""Every real field sample, alone or all together, is analysed end to end without an internal error.

The importer tests check what each sample reads as; these check that the whole
pipeline (reader, facts, spikes, rules, report) survives the sample: a
folder holding one pasted file is the commonest dump there is.
"""

from __future__ import annotations

import shutil

import pytest

from tests.conftest import SHARED_DATA

SAMPLES = SHARED_DATA / "real-samples"
SETS = ("formats", "field-2026-12")
pytestmark = pytest.mark.skipif(not SAMPLES.is_dir(), reason="../shared/data/real-samples is not here")


def _files(kind_set: str) -> list:
    root = SAMPLES / kind_set
    if not root.is_dir():
        return []
    return sorted(
        path for path in root.rglob("*") if path.is_file() and path.name not in ("README.md", "SOURCES.tsv")
    )


def _name(path) -> str:
    return "_".join(path.relative_to(SAMPLES).parts)


def _assert_analysed(run_cli, folder) -> dict:
    import json

    code, out, err = run_cli("file", folder, "--format", "json")
    assert code in (0, 2), err
    assert "bug" not in err, err
    return json.loads(out) if code == 0 else {}


@pytest.mark.parametrize("sample", [p for s in SETS for p in _files(s)], ids=_name)
def test_each_sample_alone_is_analysed_or_refused_cleanly(run_cli, tmp_path, sample):
    shutil.copy(sample, tmp_path / sample.name)
    _assert_analysed(run_cli, tmp_path)


def test_both_sample_sets_together_in_one_folder_are_analysed(run_cli, tmp_path):
    for sample in [p for s in SETS for p in _files(s)]:
        shutil.copy(sample, tmp_path / _name(sample))
    report = _assert_analysed(run_cli, tmp_path)
    assert report["evidence"]["importers"], "nothing was recognised"
    assert any("spans" in w and "days" in w for w in report["evidence"]["warnings"])
