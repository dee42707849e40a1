"""Are the scores probabilities? Every labelled case the project has, scored as a forecast.

    python benchmarks/bench_calibration.py [--seeds 2] [--suite NAME ...] [--testbed-runs DIR] [--json FILE]

The suites, each with its labels:

- ``fixtures``: every scenario of fixtures/generate.py (its cause, a second cause
  where it has one; none for healthy dumps and near misses), drawn with ``--seeds``
  seeds;
- ``variations``: the second generator's variations (fixtures/variations.py, its
  own code), drawn with the same seeds;
- ``trace-variations``: the second trace generator's profiler traces
  (fixtures/trace_variations.py, its own code), drawn with the same seeds;
- ``recorded``: the testbed's committed recordings (fixtures/recorded/*/truth.yaml),
  and with ``--testbed-runs DIR`` every run under DIR that has its truth.yaml;
- ``oom``: every real OOM message of ../shared/data/real-samples, labelled by the
  documented classification as a person read it (tests/test_oom_verdicts.py):
  a fragmentation verdict labels memory-fragmentation, any other verdict its
  absence (these cases judge memory-fragmentation alone);
- ``engine-logs``: the real vLLM logs a person read (tests/test_engine_findings.py),
  labelled with the engine cause each shows; the other real vLLM logs judge only the
  engine causes (kv-cache-pressure, engine-stall), which none of them shows.

Each hypothesis shown is a forecast that its cause is present: right when the
case is labelled with it. The reliability table bins the forecasts by score and
sets each bin's mean score against the share that was right; the Brier score is
over every (case, root-cause id) pair a suite judges, a cause not shown
forecasting 0. A *silence* is a labelled cause with nothing at 0.5 or more for
it; a *false alarm* a likely finding on a case labelled with no cause.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.quick import add_quick  # noqa: E402
from diagnose.judge.ids import root_cause_ids  # noqa: E402
from diagnose.pipeline import analyse  # noqa: E402

LIKELY = 0.5
BINS = [i / 10 for i in range(11)]
SUITES = ("fixtures", "variations", "trace-variations", "recorded", "oom", "engine-logs")
SAMPLES = ROOT.parent / "shared" / "data" / "real-samples"


@dataclass(frozen=True)
class Case:
    suite: str
    name: str
    path: Path
    causes: frozenset[str]  # the labelled causes; empty: none this project has an id for
    judges: frozenset[str]  # the ids this case can judge right or wrong


@dataclass(frozen=True)
class Scored:
    case: Case
    scores: dict[str, float]  # every hypothesis shown, by id


def _drawn(
    suite: str, drawn: tuple, write: Callable[..., Path], seeds: int, scratch: Path, every: frozenset[str]
) -> Iterator[Case]:
    """A second generator's variations, each drawn ``seeds`` times and labelled with its cause."""
    for seed in range(1, seeds + 1):
        for variation in drawn:
            folder = write(variation, scratch / f"{suite}-{variation.name}-{seed}", seed=seed)
            causes = frozenset({variation.cause} - {None})
            yield Case(suite, f"{variation.name} s{seed}", folder, causes, every)


def cases(suites: tuple[str, ...], seeds: int, scratch: Path, testbed_runs: Path | None) -> Iterator[Case]:
    every = frozenset(root_cause_ids())
    if "fixtures" in suites:
        from fixtures.generate import SCENARIOS, write_scenario

        for seed in range(seeds):
            for scenario in SCENARIOS:
                folder = write_scenario(scenario, scratch / f"fixture-{scenario.name}-{seed}", seed=seed)
                causes = {scenario.expected, *scenario.also} - {None}
                yield Case("fixtures", f"{scenario.name} s{seed}", folder, frozenset(causes), every)
    if "variations" in suites:
        from fixtures.variations import VARIATIONS, write_variation

        yield from _drawn("variations", VARIATIONS, write_variation, seeds, scratch, every)
    if "trace-variations" in suites:
        from fixtures.trace_variations import TRACE_VARIATIONS, write_trace_variation

        yield from _drawn("trace-variations", TRACE_VARIATIONS, write_trace_variation, seeds, scratch, every)
    if "recorded" in suites:
        runs = sorted((ROOT / "fixtures" / "recorded").glob("*/truth.yaml"))
        if testbed_runs is not None:
            runs += sorted(testbed_runs.glob("*/truth.yaml"))
        for truth in runs:
            cause = (yaml.safe_load(truth.read_text()) or {}).get("cause")
            label = frozenset({cause} & every)
            yield Case("recorded", truth.parent.name, truth.parent / "dump", label, every)
    if "oom" in suites and SAMPLES.is_dir():
        from tests.test_oom_verdicts import FOLDERS, FRAG, VERDICTS

        for (folder, name), verdicts in sorted(VERDICTS.items()):
            if verdicts == {FRAG}:
                label = frozenset({"memory-fragmentation"})
            elif FRAG in verdicts:
                continue  # a file whose OOMs are of both kinds: no one label
            else:
                label = frozenset()
            # a verdict speaks to fragmentation only: the engine's death after an OOM is another question
            yield Case(
                "oom", f"{folder}/{name}", FOLDERS[folder] / name, label, frozenset({"memory-fragmentation"})
            )
    if "engine-logs" in suites and SAMPLES.is_dir():
        from tests.test_engine_findings import ENGINE_CAUSES, SHOWN, _vllm_logs

        for name in _vllm_logs():
            if name in SHOWN:
                yield Case("engine-logs", name, SAMPLES / name, frozenset({SHOWN[name]}), every)
            else:
                yield Case("engine-logs", name, SAMPLES / name, frozenset(), frozenset(ENGINE_CAUSES))


def score(case: Case) -> Scored | None:
    try:
        report = analyse(str(case.path))
    except Exception as error:  # noqa: BLE001 - a file diagnose cannot read is no forecast, and said so
        print(f"  {case.suite} {case.name}: not analysed ({type(error).__name__}: {error})", file=sys.stderr)
        return None
    return Scored(case, {h.id: h.score for h in report.hypotheses if h.id in case.judges})


def reliability(scored: list[Scored]) -> list[tuple[float, float, int, float | None, float | None]]:
    """Per score bin: (low, high, forecasts, mean score, share right)."""
    forecasts = [(s, cause in item.case.causes) for item in scored for cause, s in item.scores.items()]
    rows = []
    for low, high in zip(BINS[:-1], BINS[1:], strict=True):
        inside = [(s, right) for s, right in forecasts if low <= s < high or (high == 1.0 and s == 1.0)]
        mean = sum(s for s, _ in inside) / len(inside) if inside else None
        share = sum(right for _, right in inside) / len(inside) if inside else None
        rows.append((low, high, len(inside), mean, share))
    return rows


def brier(scored: list[Scored]) -> float | None:
    errors = [
        (item.scores.get(cause, 0.0) - (cause in item.case.causes)) ** 2
        for item in scored
        for cause in item.case.judges
    ]
    return sum(errors) / len(errors) if errors else None


def summary(scored: list[Scored]) -> dict:
    labelled = [(item, cause) for item in scored for cause in item.case.causes]
    silences = [f"{item.case.name}: {c}" for item, c in labelled if item.scores.get(c, 0) < LIKELY]
    quiet = [item for item in scored if not item.case.causes]
    alarms = [
        f"{item.case.name}: " + ", ".join(f"{c} {s:.2f}" for c, s in item.scores.items() if s >= LIKELY)
        for item in quiet
        if any(s >= LIKELY for s in item.scores.values())
    ]
    wrong_likely = [
        f"{item.case.name}: {cause} {s:.2f}"
        for item in scored
        if item.case.causes
        for cause, s in item.scores.items()
        if s >= LIKELY and cause not in item.case.causes
    ]
    return {
        "cases": len(scored),
        "labelled_causes": len(labelled),
        "silences": silences,
        "quiet_cases": len(quiet),
        "false_alarms_on_quiet": alarms,
        "wrong_likely_beside_a_cause": wrong_likely,
        "brier": brier(scored),
        "reliability": reliability(scored),
        "forecasts": [
            [item.case.name, cause, s, cause in item.case.causes]
            for item in scored
            for cause, s in item.scores.items()
        ],
    }


def _table(rows: list) -> list[str]:
    out = ["| score | forecasts | mean score | share right | gap |", "|---|---:|---:|---:|---:|"]
    for low, high, n, mean, share in rows:
        if not n:
            continue
        gap = f"{share - mean:+.2f}" if n >= 10 else f"({share - mean:+.2f})"
        out.append(f"| {low:.1f}-{high:.1f} | {n} | {mean:.2f} | {share:.2f} | {gap} |")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, default=2, help="draws of each simulated scenario (default 2)")
    parser.add_argument("--suite", action="append", choices=SUITES, help="only these suites (repeatable)")
    parser.add_argument("--testbed-runs", type=Path, help="also every testbed run under this folder")
    parser.add_argument("--json", type=Path, help="write the figures here as JSON too")
    add_quick(parser)
    args = parser.parse_args()
    if args.quick:
        args.seeds, args.suite = 1, args.suite or ["recorded"]
    suites = tuple(args.suite or SUITES)
    if not SAMPLES.is_dir() and {"oom", "engine-logs"} & set(suites):
        print(f"note: {SAMPLES} is not here; the oom and engine-logs suites are left out", file=sys.stderr)
    with tempfile.TemporaryDirectory() as scratch:
        scored = [
            found
            for case in cases(suites, args.seeds, Path(scratch), args.testbed_runs)
            if (found := score(case)) is not None
        ]
    figures = {suite: summary([s for s in scored if s.case.suite == suite]) for suite in suites}
    figures["all"] = summary(scored)
    for name, figure in figures.items():
        if not figure["cases"]:
            continue
        b = f"{figure['brier']:.4f}" if figure["brier"] is not None else "-"
        print(f"\n## {name}: {figure['cases']} cases, {figure['labelled_causes']} labelled causes, Brier {b}")
        print(
            f"silences {len(figure['silences'])} of {figure['labelled_causes']}; likely findings on "
            f"{len(figure['false_alarms_on_quiet'])} of {figure['quiet_cases']} cases with no cause; "
            f"{len(figure['wrong_likely_beside_a_cause'])} wrong likely findings beside a cause"
        )
        print("\n".join(_table(figure["reliability"])))
        for label in ("silences", "false_alarms_on_quiet", "wrong_likely_beside_a_cause"):
            for line in figure[label]:
                print(f"  {label.replace('_', ' ')}: {line}")
    print("\n(gap: share right - mean score; in brackets where the bin holds fewer than 10 forecasts)")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
