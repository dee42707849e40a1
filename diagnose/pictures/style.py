"""The house style: one colour per meaning, shared time axes, readable at 100 % in a document.

matplotlib is imported here, with the Agg backend, and only when a picture is
asked for: a report without pictures never loads it.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402 - the backend is chosen first

LATENCY = "#1f4e9c"  # latency, everywhere
LATENCY_LIGHT = "#7fa3d9"  # its median, beside the P99
EPISODE = "#d62728"  # spikes: red, and nothing else is
OTHER = "#4d4d4d"  # any other signal
EVENT = "#2ca02c"  # restarts, OOMs, profiler starts
WORSE = "#e08a1e"  # a comparison's change for the worse (red is the spikes' alone)
WIDTH_IN = 9.0
ROW_IN = 1.9
DPI = 110

plt.rcParams.update(
    {
        "font.size": 9,
        "axes.titlesize": 10,
        "axes.labelsize": 9,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.grid": True,
        "grid.alpha": 0.25,
        "legend.frameon": False,
        "svg.hashsalt": "diagnose",
    }
)


def dates(times):
    """Epoch seconds as numpy datetimes, which matplotlib puts on a readable UTC axis."""
    import numpy as np

    return (np.asarray(times) * 1e6).astype("datetime64[us]")


def time_axis(axis) -> None:
    """Concise UTC dates on a time axis (the year and day once, not on every tick)."""
    from matplotlib.dates import AutoDateLocator, ConciseDateFormatter

    locator = AutoDateLocator()
    axis.xaxis.set_major_locator(locator)
    axis.xaxis.set_major_formatter(ConciseDateFormatter(locator))
    axis.set_xlabel("time (UTC)")


def save(figure, path) -> None:
    """A PNG with no time stamp or software name in it: the same data draws the same bytes."""
    figure.savefig(path, dpi=DPI, bbox_inches="tight", metadata={"Software": None})
    plt.close(figure)
