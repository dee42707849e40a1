"""Fuzz the evidence path: damaged real samples through every importer, the reader and the analysis.

    python benchmarks/bench_fuzz.py                      # 10,000 cases, every 25th analysed end to end
    python benchmarks/bench_fuzz.py --cases 500 --analyse-every 5 --seed 7

Each case takes one file of ../shared/data/real-samples, applies one to four
mutations from tests/helpers/mutate.py (lines cut, duplicated, shuffled or
dropped; bytes flipped; numbers swapped for huge, negative or non-numbers;
prompts, quotes, fences and CRLF; other encodings), then runs every importer
that recognises it, ``load_dump`` and, for every Nth case, the whole analysis.
An escape is an exception out of any of them (``DumpError`` aside) or a report
warning that calls itself a bug. Prints the escapes grouped by where they
were raised, with one reproducing case each, and exits 1 if there are any.
"""

from __future__ import annotations

import argparse
import collections
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.quick import add_quick  # noqa: E402
from diagnose.judge import default_rules_dir, load_rules  # noqa: E402
from tests.helpers.fuzz import escapes  # noqa: E402
from tests.helpers.mutate import MUTATIONS  # noqa: E402

SAMPLES = ROOT.parent / "shared" / "data" / "real-samples"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--analyse-every", type=int, default=25, metavar="N")
    parser.add_argument("--seed", type=int, default=0)
    add_quick(parser)
    args = parser.parse_args()
    if args.quick:
        args.cases, args.analyse_every = 40, 20
    samples = sorted(
        p for p in SAMPLES.rglob("*") if p.is_file() and p.name not in ("README.md", "SOURCES.tsv")
    )
    if not samples:
        print(f"no samples under {SAMPLES}", file=sys.stderr)
        return 0 if args.quick else 2
    rules = load_rules(default_rules_dir())
    rng = random.Random(args.seed)
    found: dict[str, list[str]] = collections.defaultdict(list)
    analysed = 0
    started = time.perf_counter()
    for case in range(args.cases):
        sample = rng.choice(samples)
        mutations = [rng.randrange(len(MUTATIONS)) for _ in range(rng.randint(1, 4))]
        seed = rng.randrange(2**31)
        analyse = case % args.analyse_every == 0
        analysed += analyse
        with tempfile.TemporaryDirectory() as folder:
            for escape in escapes(sample, mutations, seed, Path(folder), analyse, rules):
                found[escape].append(f"{sample.relative_to(SAMPLES)} mutations={mutations} seed={seed}")
    elapsed = time.perf_counter() - started
    total = sum(len(cases) for cases in found.values())
    print(
        f"{args.cases:,} cases from {len(samples)} samples ({analysed:,} analysed end to end) "
        f"in {elapsed:.0f} s: {total} escape(s), {len(found)} distinct"
    )
    for escape, cases in sorted(found.items(), key=lambda item: -len(item[1])):
        print(f"  {len(cases):>5}  {escape}\n         e.g. {cases[0]}")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
