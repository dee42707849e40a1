"""``python -m testbed``: run a scenario on the real testbed service, list them, or score recorded runs."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from diagnose.commands.status_line import StatusLine
from testbed.llm import engine, runner as engine_runner
from testbed.llm.scenarios import ENGINE_SCENARIOS, EngineScenario
from testbed.pack import pack
from testbed.runner import RunError, run, runs_under
from testbed.scenarios import SCENARIOS
from testbed.score import by_scenario, score_run, table

DEFAULT_RUNS = Path("testbed-runs")


def _duration(text: str) -> float:
    units = {"s": 1, "m": 60, "h": 3600}
    try:
        if text[-1:].lower() in units:
            return float(text[:-1]) * units[text[-1].lower()]
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a duration such as 90s, 5m or 1h, got {text!r}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testbed", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    run_cmd = commands.add_parser("run", help="run one scenario and record it")
    run_cmd.add_argument("scenario", help="a scenario name (python -m testbed list)")
    run_cmd.add_argument(
        "--duration", type=_duration, help="how long to drive the load (default: the scenario's)"
    )
    run_cmd.add_argument("--out", type=Path, help=f"the run folder (default: {DEFAULT_RUNS}/SCENARIO-TIME)")
    run_cmd.add_argument("--seed", type=int, default=0, help="seed of the load and the fault timing")
    run_cmd.add_argument(
        "--quiet", action="store_true", help="no status line while running (none is drawn off a terminal)"
    )
    run_cmd.add_argument(
        "--without-fault",
        action="store_true",
        help="the same service, load and seed with the fault removed (what fixing it delivers)",
    )
    commands.add_parser("list", help="the scenarios and what each injects")
    commands.add_parser(
        "engine",
        help="build llama.cpp's server from the registry's sources (once; minutes) and write the tiny model",
    )
    score_cmd = commands.add_parser("score", help="diagnose recorded runs and score the ranking")
    score_cmd.add_argument(
        "runs", nargs="*", type=Path, help=f"run folders or folders of runs (default: {DEFAULT_RUNS})"
    )
    pack_cmd = commands.add_parser("pack", help="pack recorded runs as regression fixtures (tables gzipped)")
    pack_cmd.add_argument("runs", nargs="+", type=Path, help="run folders or folders of runs")
    pack_cmd.add_argument("--into", type=Path, default=Path("fixtures/recorded"), help="default: %(default)s")
    args = parser.parse_args(argv)

    if args.command == "engine":
        return _engine()
    if args.command == "list":
        for scenario in [*SCENARIOS.values(), *ENGINE_SCENARIOS.values()]:
            note = f"  [not here: {reason}]" if (reason := scenario.unavailable()) else ""
            note += "  [not in the benchmark: see docs/testbed.md]" if scenario.benchmark_skip else ""
            print(f"{scenario.name:26} {scenario.cause or 'healthy':26} {scenario.summary}{note}")
        return 0
    if args.command == "run":
        scenario = SCENARIOS.get(args.scenario) or ENGINE_SCENARIOS.get(args.scenario)
        if scenario is None:
            known = ", ".join([*SCENARIOS, *ENGINE_SCENARIOS])
            print(f"testbed: unknown scenario {args.scenario!r}; one of: {known}", file=sys.stderr)
            return 2
        if args.without_fault:
            scenario = scenario.without_fault()
        duration = args.duration or scenario.default_duration_s
        out = args.out or DEFAULT_RUNS / f"{scenario.name}-{time.strftime('%Y%m%d-%H%M%S')}"
        status = StatusLine.for_terminal(args.quiet)
        runner = engine_runner.run if isinstance(scenario, EngineScenario) else run
        try:
            dump = runner(scenario, duration, out, seed=args.seed, say=status.say, progress=status.show)
        except RunError as error:
            status.clear()
            print(f"testbed: {error}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            status.clear()
            print("testbed: interrupted; everything it started has been stopped", file=sys.stderr)
            return 130
        status.clear()
        print(f"testbed: recorded {dump}; score it with: python -m testbed score {out}")
        return 0
    if args.command == "pack":
        runs = list(runs_under(args.runs))
        if not runs:
            print("testbed: no runs (folders with truth.yaml) found", file=sys.stderr)
            return 2
        for folder in runs:
            print(f"testbed: packed {folder} into {pack(folder, args.into)}")
        return 0
    folders = args.runs or [DEFAULT_RUNS]
    missing = [str(f) for f in folders if not f.exists()]
    if missing:
        print(f"testbed: no such folder: {', '.join(missing)}", file=sys.stderr)
        return 2
    runs = list(runs_under(folders))
    if not runs:
        print("testbed: no runs (folders with truth.yaml) found", file=sys.stderr)
        return 2
    try:
        scores = [score_run(folder) for folder in runs]
        print(table(scores))
        print()
        print(by_scenario(scores))
    except RuntimeError as error:
        print(f"testbed: {error}", file=sys.stderr)
        return 2
    return 0


def _engine() -> int:
    try:
        built = engine.ensure()
    except engine.EngineUnavailable as error:
        print(f"testbed: {error}", file=sys.stderr)
        return 2
    from testbed.tokenizer import words

    model = engine.model(words())
    took = f" (built in {built.build_seconds:.0f} s)" if built.build_seconds else ""
    print(f"testbed: llama.cpp's server: {built.server}{took}")
    print(f"testbed: the tiny model: {model}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
