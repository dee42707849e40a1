"""The detector on real labelled series: TCPD change points and NAB anomaly windows.

    python benchmarks/bench_changepoint.py [--data ../shared/data/changepoint]

TCPD (Turing Change Point Dataset): every univariate series present is run
through `detect_shifts` (ruptures KernelCPD, l2 cost, penalty 3 sigma^2 ln n
with sigma from the series' own first differences, no per-series tuning) and
scored with the benchmark's F1 (margin 5). The "zero" method (no change point
at all) is scored on the same series, since the published figures were
averaged over a larger set: binseg's default-parameter F1 of 0.744 is the
number to beat.

NAB (realKnownCause, realAWSCloudwatch): episodes and change points together
are the detections, scored with window precision, recall and F1 against the
combined label windows.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.changepoint_metrics import tcpd_f1, window_f1  # noqa: E402
from diagnose.detect.episodes import change_points, detect_shifts, find_episodes  # noqa: E402

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "changepoint"
PUBLISHED_BINSEG_DEFAULT_F1 = 0.744


def run_tcpd(folder: Path) -> None:
    annotations = json.loads((folder / "annotations.json").read_text())
    ours, zero, names = [], [], []
    for path in sorted((folder / "datasets").glob("*/*.json")):
        data = json.loads(path.read_text())
        if data["n_dim"] != 1 or data["name"] not in annotations:
            continue
        raw = pd.to_numeric(pd.Series(data["series"][0]["raw"]), errors="coerce")
        series = raw.interpolate(limit_direction="both").to_numpy(dtype="float64")
        predicted = detect_shifts(series)
        truth = annotations[data["name"]]
        ours.append(tcpd_f1(truth, predicted))
        zero.append(tcpd_f1(truth, []))
        names.append(data["name"])
        print(
            f"  {data['name']:<22} n={series.size:>5}  found {len(predicted):>2}  "
            f"F1 {ours[-1]:.3f}  (zero {zero[-1]:.3f})"
        )
    mean, mean_zero = float(np.mean(ours)), float(np.mean(zero))
    print(
        f"TCPD: {len(ours)} univariate series; mean F1 {mean:.3f}, "
        f"zero method {mean_zero:.3f} on the same series;"
    )
    print(
        f"      published binseg default F1 {PUBLISHED_BINSEG_DEFAULT_F1} (over the full set): "
        f"difference {mean - PUBLISHED_BINSEG_DEFAULT_F1:+.3f}"
    )


def run_nab(folder: Path) -> None:
    windows = json.loads((folder / "labels" / "combined_windows.json").read_text())
    totals = []
    for path in sorted((folder / "data").glob("*/*.csv")):
        key = f"{path.parent.name}/{path.name}"
        if key not in windows:
            continue
        frame = pd.read_csv(path)
        ts = ((pd.to_datetime(frame["timestamp"]) - pd.Timestamp(0)) / pd.Timedelta(seconds=1)).to_numpy()
        values = frame["value"].to_numpy(dtype="float64")
        step = float(np.median(np.diff(ts)))
        grid = np.full(int(round((ts[-1] - ts[0]) / step)) + 1, np.nan)
        grid[np.round((ts - ts[0]) / step).astype("int64")] = values
        episodes = find_episodes(grid, ts[0], step)
        detections = [e.start for e in episodes] + change_points(grid, ts[0], step, episodes)
        labelled = [(pd.Timestamp(a).timestamp(), pd.Timestamp(b).timestamp()) for a, b in windows[key]]
        precision, recall, f1 = window_f1(labelled, detections)
        totals.append((precision, recall, f1))
        print(
            f"  {key:<58} windows {len(labelled)}  detections {len(detections):>3}  "
            f"P {precision:.2f} R {recall:.2f} F1 {f1:.2f}"
        )
    p, r, f = np.mean(totals, axis=0)
    print(f"NAB: {len(totals)} series; mean window precision {p:.3f}, recall {r:.3f}, F1 {f:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args()
    if not args.data.is_dir():
        raise SystemExit(f"{args.data}: no such folder (the shared change-point data is not here)")
    run_tcpd(args.data / "tcpd")
    run_nab(args.data / "nab")


if __name__ == "__main__":
    main()
