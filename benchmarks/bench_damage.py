"""Do the importers read the format, or the sample? Every real sample under every damage of pasting.

    python benchmarks/bench_damage.py                 # every sample, every damage alone and in pairs
    python benchmarks/bench_damage.py --alone         # each damage alone (what the tests run)
    python benchmarks/bench_damage.py --show 5        # five failing cases per damage, by file

Each real sample of ``../shared/data/real-samples`` that its importer reads
with rows is damaged by every operator of ``tests/helpers/damage.py`` (a
process tag on every line, a quote, entities, a prompt, curl's meter, a hard
wrap at 80/120/200, glued lines, a start or an end cut off ...) alone and
two at a time, then read as ``diagnose file`` reads it. Per format and per
damage: how many read the same rows as the clean sample, fewer (the damage
destroyed figures), none (a clean refusal), different rows (wrong) or raised.
A reversible damage (everything but wraps, glue and cuts) must give the same
rows; any damage may lose rows but never change one. Exits 1 if any case is
wrong.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.quick import add_quick  # noqa: E402
from tests.helpers.damage import DAMAGES, Damage, rows, verdict  # noqa: E402

SAMPLES = Path(__file__).resolve().parents[2] / "shared" / "data" / "real-samples"
BATCHES = ("formats", "field-2026-12")
# Pairs seen together in the field: a prefix and a wrap, a quote and its entities, ...
PAIRS = (
    ("vllm-process-tags", "wrap-120"),
    ("compose-prefix", "wrap-80"),
    ("markdown-quote", "html-entities"),
    ("markdown-quote", "code-fence"),
    ("indent-4", "code-fence"),
    ("shell-prompt", "crlf"),
    ("colour-codes", "compose-prefix"),
    ("kubectl-prefix", "cut-start-30pct"),
    ("markdown-escapes", "wrap-120"),
    ("tmux-indicator", "shell-prompt"),
    ("curl-meter", "markdown-quote"),
    ("vllm-process-tags", "glued-every-7"),
)


def samples(batches: tuple[str, ...] = BATCHES) -> list[tuple[str, Path]]:
    """(format, path) for every sample of the batches (by default the two the grammar was proven on)."""
    found = []
    for batch in batches:
        root = SAMPLES / batch
        kinds = _field_kinds(root)
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            if path.name in ("README.md", "SOURCES.tsv"):
                continue
            relative = path.relative_to(root).as_posix()
            found.append((kinds.get(relative, relative.split("/")[0]), path))
    return found


def _field_kinds(root: Path) -> dict[str, str]:
    sources = root / "SOURCES.tsv"
    if not sources.is_file():
        return {}
    with open(sources, encoding="utf-8") as handle:
        return {row.get("file") or row["path"]: row["kind"] for row in csv.DictReader(handle, delimiter="\t")}


def run(alone_only: bool, limit: int | None = None, batches: tuple[str, ...] = BATCHES) -> tuple[dict, list]:
    """Every sample with rows (the first ``limit``) of the batches under every damage."""
    combos: list[tuple[Damage, ...]] = [(damage,) for damage in DAMAGES]
    if not alone_only:
        by_name = {damage.name: damage for damage in DAMAGES}
        combos += [(by_name[a], by_name[b]) for a, b in PAIRS]
    counts: dict = defaultdict(Counter)
    failures: list = []
    read = 0
    for kind, path in samples(batches):
        if limit is not None and read >= limit:
            break
        text = path.read_text(encoding="utf-8", errors="replace")
        clean = rows(text, path.name)
        if not clean[1]:
            continue  # a look-alike or a file with nothing to keep: no rows to compare
        read += 1
        for combo in combos:
            damaged = text
            for damage in combo:
                damaged = damage.apply(damaged)
            name = "+".join(d.name for d in combo)
            outcome = verdict(clean, damaged, path.name)
            counts[(kind, name)][outcome.split(":")[0]] += 1
            wrong = outcome.startswith(("different", "error"))
            lossy = outcome != "same" and all(d.reversible for d in combo)
            if wrong or lossy:
                failures.append((name, outcome, path.relative_to(SAMPLES).as_posix()))
    return counts, failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--alone", action="store_true", help="each damage alone, no pairs")
    parser.add_argument(
        "--batch",
        action="append",
        help=f"a batch under real-samples (default: {', '.join(BATCHES)}); a new batch checks the grammar",
    )
    parser.add_argument("--show", type=int, default=3, help="failing files shown per damage")
    add_quick(parser)
    args = parser.parse_args()
    if not SAMPLES.is_dir():
        print(f"{SAMPLES} is not here: nothing to measure", file=sys.stderr)
        return 0 if args.quick else 2
    started = time.perf_counter()
    batches = tuple(args.batch) if args.batch else BATCHES
    counts, failures = run(args.alone or args.quick, limit=12 if args.quick else None, batches=batches)
    outcomes = ("same", "fewer", "refused", "different", "error")
    by_damage: dict = defaultdict(Counter)
    by_kind: dict = defaultdict(Counter)
    for (kind, damage), counter in counts.items():
        by_damage[damage].update(counter)
        by_kind[kind].update(counter)
    for title, table in (("damage", by_damage), ("format", by_kind)):
        print(f"\n| {title} | " + " | ".join(outcomes) + " |")
        print("|---|" + "---:|" * len(outcomes))
        for key in sorted(table):
            print(f"| {key} | " + " | ".join(str(table[key][o]) for o in outcomes) + " |")
    total = sum(by_damage.values(), Counter())
    cases = sum(total.values())
    said = ", ".join(f"{total[o]} {o}" for o in outcomes)
    print(f"\n{cases} cases in {time.perf_counter() - started:.1f} s: {said}")
    shown: Counter = Counter()
    if failures:
        print("\nfailing cases (wrong rows or an exception anywhere; fewer/none under a reversible damage):")
    for name, outcome, where in failures:
        if shown[name] < args.show:
            print(f"  {name}: {outcome} - {where}")
        shown[name] += 1
    wrong = total["different"] + total["error"]
    return 1 if total["error"] or (wrong and not args.quick) else 0  # quick: only a crash fails


if __name__ == "__main__":
    sys.exit(main())
