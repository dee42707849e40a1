"""The benchmark metrics, checked against the published definitions' own examples."""

from __future__ import annotations

import pytest

from benchmarks.changepoint_metrics import tcpd_f1, window_f1


@pytest.mark.parametrize(
    ("annotations", "predicted", "expected"),
    [
        ({"1": [10, 20], "2": [11, 20], "3": [10], "4": [0, 5]}, [10, 20], 1.0),
        ({"1": [], "2": [10], "3": [50]}, [10], 0.9090909090909091),
        ({"1": [], "2": [10], "3": [50]}, [], 0.8),
    ],
)
def test_tcpd_f1_matches_the_papers_examples(annotations, predicted, expected):
    assert tcpd_f1(annotations, predicted) == pytest.approx(expected)


def test_window_f1_counts_windows_found_and_detections_outside():
    precision, recall, f1 = window_f1([(10, 20), (50, 60)], [12, 15, 30])
    assert (precision, recall) == (0.5, 0.5) and f1 == 0.5
