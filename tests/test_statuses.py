"""Request statuses: read once per distinct value, answered per request."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from diagnose.facts.latency import Statuses

NAN = float("nan")


@pytest.mark.parametrize(
    ("column", "failed", "ooms"),
    [
        (pd.Series(["ok", " OK ", None, "OOM", "500", "200", "error"]), [0, 0, NAN, 1, 1, 0, 1], 1),
        (pd.Series([200, 404, 500, 200]), [0, 1, 1, 0], 0),
        (pd.Series([200.0, NAN, 503.0]), [0, NAN, 1], 0),  # codes read from a column with gaps
        (pd.Series(["done", 204, None, "oom "], dtype=object), [0, 0, NAN, 1], 1),
        (pd.Series(["Success", "x"], dtype="string"), [0, 1], 0),
        (pd.Series([None, None], dtype=object), [NAN, NAN], 0),
        (pd.Series([], dtype=object), [], 0),
    ],
    ids=["words", "http-codes", "float-codes", "mixed", "string-dtype", "none-logged", "empty"],
)
def test_each_request_reads_its_own_status(column, failed, ooms):
    statuses = Statuses.of(column)
    np.testing.assert_array_equal(statuses.failed(), np.array(failed, dtype="float64"))
    assert statuses.count("oom") == ooms


def test_a_million_requests_with_few_statuses_keep_their_order():
    rng = np.random.default_rng(0)
    column = pd.Series(rng.choice(["ok", "error", "oom", None], 1_000_000))
    statuses = Statuses.of(column)
    assert len(statuses.words) == 3
    expected = np.where(column.isna(), NAN, (column != "ok").astype("float64"))
    np.testing.assert_array_equal(statuses.failed(), expected)
    assert statuses.count("oom") == int((column == "oom").sum())
