"""A report's sentences have no holes where figures are missing (issue 59): every section rendered from
dumps whose tables lose values, in text and Markdown, says no "none" where a number belongs, no
"nan", "None" or "(s)"."""

from __future__ import annotations

import re
import shutil

import pandas as pd
import pytest

from diagnose.dump import load_dump
from tests.conftest import DUMPS

# "none" as a figure: after a word that takes one ("at none", "of none of a core", "is none").
_HOLE = re.compile(r"\b(?:at|of|is|was|by|to|from|reads|took|with) none\b(?! of (?:them|these|those))")
_RAW = re.compile(r"\bnan\b|\bNone\b|\(s\)|\(es\)|\bNaN\b")


def _thinned(source, folder, keep_every: int):
    """The dump with its tables' figures missing on most rows: only every ``keep_every``-th row keeps
    its numbers (times, ids and names stay)."""
    shutil.copytree(source, folder)
    dump = load_dump(str(folder))
    for name, table in dump.tables.items():
        if name in ("events",) or table.empty:
            continue
        figures = [c for c in table.columns if c not in ("ts", "gpu", "pid", "name", "kind", "id", "stage")]
        numeric = [c for c in figures if pd.api.types.is_numeric_dtype(table[c])]
        thinned = table.copy()
        thinned.loc[thinned.index % keep_every != 0, numeric] = float("nan")
        for path in folder.glob(f"{name}.*"):
            path.unlink()
        thinned.to_csv(folder / f"{name}.csv", index=False)
    return folder


@pytest.mark.parametrize("dump", ["kv-cache-pressure", "cpu-bound-stage", "co-located-contention"])
@pytest.mark.parametrize("keep_every", [1, 3])
def test_every_section_reads_whole_when_figures_are_missing(run_cli, tmp_path, dump, keep_every):
    folder = _thinned(DUMPS / dump, tmp_path / dump, keep_every)
    for form in ("text", "markdown"):
        code, out, err = run_cli("file", folder, "--format", form, "--width", "200")
        assert code == 0, err
        holes = [line for line in out.splitlines() if _HOLE.search(line) or _RAW.search(line)]
        assert holes == [], form
