"""The detector on real labelled series: TCPD change points and NAB anomaly windows.

    python benchmarks/bench_changepoint.py [--data ../shared/data/changepoint]

TCPD (Turing Change Point Dataset): every univariate series present is run
through `detect_shifts` (levels and lines compete, see
diagnose/detect/shifts.py; no per-series tuning) and scored with the
benchmark's F1 (margin 5). Three comparisons:

- against binary segmentation with default parameters on the *same* series,
  from TCPDBench's published per-series scores (below), and against its
  published mean over the full set, 0.744, the number to beat;
- an ablation: levels only (the l2 cost; this detector before lines were
  added), lines only, and both;
- penalty sensitivity: every change's penalty x 0.67, 1, 1.33 and 1.67, so a
  reader can see whether the result rests on one lucky setting.

NAB (realKnownCause, realAWSCloudwatch): episodes and change points together
are the detections, scored with window precision, recall and F1 against the
combined label windows, twice: with every episode, and with the unusual ones
only (those unlike the signal's routine, diagnose/detect/routine.py), since
NAB labels what is rare for a series, not every burst it makes; a sensitivity
table varies the routine test's three constants.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.changepoint_metrics import tcpd_f1, window_f1  # noqa: E402
from benchmarks.quick import add_quick  # noqa: E402
from diagnose.detect import routine  # noqa: E402
from diagnose.detect.episodes import Episode, find_episodes  # noqa: E402
from diagnose.detect.shifts import LEVELS, LINES, change_points, detect_shifts  # noqa: E402

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "changepoint"
PUBLISHED_BINSEG_DEFAULT_F1 = 0.744
# Default-parameter F1 of binseg per series: TCPDBench, analysis/output/scores/
# default_f1_scores.json at commit 6662025f5847f6b214f05ad11e4950eba488c0df (MIT licence).
# None: binseg failed on that series (it has missing values).
BINSEG_DEFAULT_F1 = {
    "bank": 0.4, "bitcoin": 0.4257, "brent_spot": 0.4834, "businv": 0.3704, "centralia": 0.9091,
    "children_per_woman": 0.6175, "co2_canada": 0.6906, "construction": 0.7091, "debt_ireland": 0.7603,
    "gdp_argentina": 0.8889, "gdp_croatia": 0.5833, "gdp_iran": 0.4915, "gdp_japan": 0.6154,
    "global_co2": 0.9286, "homeruns": 0.8119, "iceland_tourism": 0.6429, "jfk_passengers": 0.7755,
    "lga_passengers": 0.4382, "measles": 0.9474, "nile": 1.0, "ozone": 0.6496, "quality_control_1": 1.0,
    "quality_control_2": 1.0, "quality_control_3": 1.0, "quality_control_4": 0.8727,
    "quality_control_5": 1.0, "rail_lines": 0.8462, "ratner_stock": 0.8235, "robocalls": 0.8,
    "scanline_126007": 0.7386, "scanline_42049": 0.7135, "seatbelts": 0.6829, "shanghai_license": 0.8679,
    "uk_coal_employ": None, "unemployment_nl": 0.8764, "us_population": 0.6667, "usd_isk": 0.6565,
    "well_log": 0.5342,
}  # fmt: skip
PENALTY_SCALES = (0.67, 1.0, 1.33, 1.67)


def load_tcpd(folder: Path, limit: int | None = None) -> list[tuple[str, np.ndarray, dict[str, list[int]]]]:
    """(name, series, annotations) of every univariate annotated series (the first ``limit``); gaps
    interpolated."""
    annotations = json.loads((folder / "annotations.json").read_text())
    series = []
    for path in sorted((folder / "datasets").glob("*/*.json")):
        if limit is not None and len(series) >= limit:
            break
        data = json.loads(path.read_text())
        if data["n_dim"] != 1 or data["name"] not in annotations:
            continue
        raw = pd.to_numeric(pd.Series(data["series"][0]["raw"]), errors="coerce")
        values = raw.interpolate(limit_direction="both").to_numpy(dtype="float64")
        series.append((data["name"], values, annotations[data["name"]]))
    return series


def run_tcpd(folder: Path, limit: int | None = None) -> None:
    series = load_tcpd(folder, limit)
    ours, zero = [], []
    print(f"  {'series':<22} {'n':>5}  found  F1     binseg  zero")
    for name, values, truth in series:
        predicted = detect_shifts(values)
        ours.append(tcpd_f1(truth, predicted))
        zero.append(tcpd_f1(truth, []))
        binseg = BINSEG_DEFAULT_F1.get(name)
        shown = f"{binseg:.3f}" if binseg is not None else "failed"
        print(
            f"  {name:<22} {values.size:>5}  {len(predicted):>5}  {ours[-1]:.3f}  {shown:<6}  {zero[-1]:.3f}"
        )
    mean = float(np.mean(ours))
    print(f"TCPD: {len(ours)} univariate series; mean F1 {mean:.3f}, zero method {np.mean(zero):.3f}")
    print(
        f"  against binseg's published default F1 {PUBLISHED_BINSEG_DEFAULT_F1} (over the full set): "
        f"{mean - PUBLISHED_BINSEG_DEFAULT_F1:+.3f}"
    )
    paired = [(f, BINSEG_DEFAULT_F1[name]) for f, (name, _, _) in zip(ours, series, strict=True)]
    paired = [(f, b) for f, b in paired if b is not None]
    if paired:
        mine, theirs = np.array(paired).T
        print(
            f"  against binseg on the same {len(paired)} series it ran on: {mine.mean():.3f} vs "
            f"{theirs.mean():.3f} ({mine.mean() - theirs.mean():+.3f}); better on "
            f"{int(np.sum(mine > theirs + 1e-3))}, worse on {int(np.sum(mine < theirs - 1e-3))}, "
            f"equal on {int(np.sum(np.abs(mine - theirs) <= 1e-3))}"
        )
    for label, models in (("levels only", [LEVELS]), ("lines only", [LINES])):
        print(f"  ablation, {label:<17} mean F1 {_mean_f1(series, models=models):.3f}")
    print(f"  ablation, {'levels and lines':<17} mean F1 {mean:.3f}")
    for scale in PENALTY_SCALES:
        scaled = mean if scale == 1.0 else _mean_f1(series, penalty_scale=scale)
        print(f"  penalty x {scale:<4}  mean F1 {scaled:.3f}")


def _mean_f1(series: list[tuple[str, np.ndarray, dict[str, list[int]]]], **options) -> float:
    """Mean TCPD F1 of `detect_shifts` run with non-default options."""
    return float(np.mean([tcpd_f1(truth, detect_shifts(values, **options)) for _, values, truth in series]))


def run_nab(folder: Path, limit: int | None = None) -> None:
    series = load_nab(folder, limit)
    every, unusual = [], []
    print(f"  {'series':<58} windows  episodes  unusual  change points  every episode  unusual only")
    for key, episodes, changes, labelled in series:
        kept = _unusual(episodes)
        every.append(window_f1(labelled, [e.start for e in episodes] + changes))
        unusual.append(window_f1(labelled, [e.start for e in kept] + changes))
        print(
            f"  {key:<58} {len(labelled):>7}  {len(episodes):>8}  {len(kept):>7}  {len(changes):>13}  "
            f"P {every[-1][0]:.2f} R {every[-1][1]:.2f}  P {unusual[-1][0]:.2f} R {unusual[-1][1]:.2f}"
        )
    for label, totals in (("every episode", every), ("unusual episodes", unusual)):
        p, r, f = np.mean(totals, axis=0)
        print(f"NAB, {label}: {len(totals)} series; mean window precision {p:.3f}, ", end="")
        print(f"recall {r:.3f}, F1 {f:.3f}")
    print("  routine test's sensitivity (population, fence, spread floor): precision, recall, F1")
    defaults = (routine.MIN_POPULATION, routine.FENCE, routine.SPREAD_FLOOR)
    for setting in itertools.product((5, 8, 12), (2.5, 3.0, 3.5), (1.1, 1.25, 1.5)):
        scores = [window_f1(w, [e.start for e in _unusual(eps, *setting)] + cps) for _, eps, cps, w in series]
        p, r, f = np.mean(scores, axis=0)
        mark = "  (default)" if setting == defaults else ""
        print(f"    {setting[0]:>2}  {setting[1]:.1f}  {setting[2]:.2f}:  {p:.3f}  {r:.3f}  {f:.3f}{mark}")


def load_nab(
    folder: Path, limit: int | None = None
) -> list[tuple[str, list[Episode], list[float], list[tuple[float, float]]]]:
    """(name, episodes, change points, label windows) of every labelled series (the first ``limit``), on
    its own time grid."""
    windows = json.loads((folder / "labels" / "combined_windows.json").read_text())
    series = []
    for path in sorted((folder / "data").glob("*/*.csv")):
        if limit is not None and len(series) >= limit:
            break
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
        changes = change_points(grid, ts[0], step, episodes)
        labelled = [(pd.Timestamp(a).timestamp(), pd.Timestamp(b).timestamp()) for a, b in windows[key]]
        series.append((key, episodes, changes, labelled))
    return series


def _unusual(episodes: list[Episode], *setting: float) -> list[Episode]:
    """The episodes not routine for their series (the routine test's defaults, or ``setting``)."""
    flags = routine.routine_flags(episodes, *setting)
    return [e for e, usual in zip(episodes, flags, strict=True) if not usual]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    add_quick(parser)
    args = parser.parse_args()
    if not args.data.is_dir():
        if args.quick:
            print(f"skipped: {args.data} is not here")
            return
        raise SystemExit(f"{args.data}: no such folder (the shared change-point data is not here)")
    limit = 3 if args.quick else None
    run_tcpd(args.data / "tcpd", limit)
    run_nab(args.data / "nab", limit)


if __name__ == "__main__":
    main()
