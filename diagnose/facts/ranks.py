"""Rank correlation, shared by the facts that ask whether one thing follows another."""

from __future__ import annotations

import numpy as np
import pandas as pd

_MAX_CORR_SAMPLE = 50_000  # Spearman standard error ~0.005 at this size


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Rank correlation; a large sample is subsampled (standard error ~0.005 at 50,000)."""
    if x.size > _MAX_CORR_SAMPLE:
        pick = np.random.default_rng(0).choice(x.size, _MAX_CORR_SAMPLE, replace=False)
        x, y = x[pick], y[pick]
    rx = pd.Series(x).rank().to_numpy()
    ry = pd.Series(y).rank().to_numpy()
    if np.std(rx) == 0 or np.std(ry) == 0:
        return 0.0
    return float(np.corrcoef(rx, ry)[0, 1])
