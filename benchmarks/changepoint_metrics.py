"""The change-point F1 of the TCPD benchmark (van den Burg & Williams, 2020), and NAB window F1.

TCPD: a prediction is a true positive for an annotated change point within
``margin`` samples, each prediction used once; index 0 counts as a change
point in every set. Precision is taken against the union of the annotators'
points, recall is averaged over annotators, F1 = 2PR / (P + R).

NAB labels anomaly *windows*; a window counts as found when a detection falls
inside it, and each detection outside every window is a false positive.
"""

from __future__ import annotations


def _matched(truth: set[int], predicted: set[int], margin: int) -> int:
    """How many true points have a prediction within the margin, each prediction used once."""
    left = set(predicted)
    hits = 0
    for point in sorted(truth):
        near = sorted((abs(point - p), p) for p in left if abs(point - p) <= margin)
        if near:
            left.remove(near[0][1])
            hits += 1
    return hits


def tcpd_f1(annotations: dict[str, list[int]], predicted: list[int], margin: int = 5) -> float:
    per_annotator = [set(points) | {0} for points in annotations.values()]
    union = set().union(*per_annotator)
    guesses = set(predicted) | {0}
    precision = _matched(union, guesses, margin) / len(guesses)
    recall = sum(_matched(points, guesses, margin) / len(points) for points in per_annotator) / len(
        per_annotator
    )
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def window_f1(windows: list[tuple[float, float]], detections: list[float]) -> tuple[float, float, float]:
    """Precision, recall and F1 of detections against labelled windows."""
    found = sum(any(a <= d <= b for d in detections) for a, b in windows)
    outside = sum(not any(a <= d <= b for a, b in windows) for d in detections)
    precision = found / (found + outside) if found + outside else 1.0
    recall = found / len(windows) if windows else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1
