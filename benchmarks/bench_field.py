"""How much of a batch of real pastes is read, and what the diagnosis names on each file alone.

    python benchmarks/bench_field.py                          # every batch under ../shared/data/real-samples
    python benchmarks/bench_field.py --batch field-2026-12-b  # one batch
    python benchmarks/bench_field.py --tsv out.tsv            # one row per file, for a before/after diff
    python benchmarks/bench_field.py --quick                  # the first 12 files of each batch (CI)

Each file is analysed alone, as a user drops one paste into a folder: which importer read it (or
none), how many rows, which events came of it (from its importer and from the statements found on
its lines, statements/), and the first hypothesis with its score. A file is *read* when rows came of
it. Where ``tests/helpers/field_causes.py`` states the cause a file shows plainly, the file counts as
*named* when that cause is first and likely (>= 0.5). The batches are a check, not a specification:
the measure that counts is a batch nobody here has seen.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.quick import add_quick  # noqa: E402

_ROOT = Path(__file__).resolve().parents[1]
REAL = _ROOT.parent / "shared" / "data" / "real-samples"
_SKIP = {"README.md", "SOURCES.tsv"}


def _files(batch: Path) -> list[Path]:
    return sorted(p for p in batch.rglob("*") if p.is_file() and p.name not in _SKIP)


def measure(path: Path) -> dict[str, object]:
    """What ``diagnose file`` makes of one file alone."""
    from diagnose.errors import DiagnoseError
    from diagnose.pipeline import analyse_path

    with tempfile.TemporaryDirectory() as folder:
        shutil.copy(path, Path(folder) / path.name)
        try:
            dump, analysis = analyse_path(folder, helper=False)
        except DiagnoseError as error:
            return {
                "read": False,
                "importer": "",
                "rows": 0,
                "events": "",
                "top": "",
                "score": 0.0,
                "why": str(error).split(": ", 1)[-1][:80],
            }
    report = analysis.report
    used = [i for i in report.evidence.importers if i.rows]
    events = dump.table("events")
    kinds = Counter(events["kind"].astype(str)) if events is not None and "kind" in events else Counter()
    top = report.hypotheses[0] if report.hypotheses else None
    return {
        "read": bool(used),
        "importer": ",".join(i.importer for i in used),
        "rows": sum(i.rows for i in used),
        "events": " ".join(f"{k}:{n}" for k, n in sorted(kinds.items())),
        "top": top.id if top else "",
        "score": round(top.score, 2) if top else 0.0,
        "why": "",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batch", action="append", help="a folder under real-samples (default: all)")
    parser.add_argument("--tsv", type=Path, help="write one row per file here")
    add_quick(parser)
    args = parser.parse_args(argv)
    if not REAL.is_dir():
        print(f"no real samples at {REAL}: nothing to measure")
        return 0
    sys.path.insert(0, str(_ROOT))
    from tests.helpers.field_causes import CAUSES

    batches = (
        [REAL / b for b in args.batch] if args.batch else sorted(p for p in REAL.iterdir() if p.is_dir())
    )
    rows: list[tuple[str, dict[str, object]]] = []
    for batch in batches:
        if batch.name == "profiler-traces":
            continue  # traces are measured by bench_trace and tests/test_profiler_traces.py
        files = _files(batch)[: 12 if args.quick else None]
        for path in files:
            rows.append((str(path.relative_to(REAL)), measure(path)))
    print(f"{'batch':<18} {'files':>6} {'read':>6} {'stated':>7} {'named':>6} {'likely, no cause':>17}")
    for batch in batches:
        mine = [(name, row) for name, row in rows if name.startswith(batch.name + "/")]
        if not mine:
            continue
        stated = [(n, r) for n, r in mine if n in CAUSES]
        named = [n for n, r in stated if r["top"] == CAUSES[n] and float(r["score"]) >= 0.5]  # type: ignore[arg-type]
        alarms = [n for n, r in mine if n not in CAUSES and float(r["score"]) >= 0.5]  # type: ignore[arg-type]
        read = sum(1 for _, r in mine if r["read"])
        print(f"{batch.name:<18} {len(mine):>6} {read:>6} {len(stated):>7} {len(named):>6} {len(alarms):>17}")
        for name, row in stated:
            if name not in named:
                print(
                    f"  missed {name}: wanted {CAUSES[name]}, got {row['top'] or 'nothing'} {row['score']}"
                    f" ({row['importer'] or 'unread'}; {row['events'] or 'no events'})"
                )
        for name in alarms:
            row = dict(mine)[name]
            print(f"  likely with no stated cause {name}: {row['top']} {row['score']}")
    if args.tsv:
        columns = ("read", "importer", "rows", "events", "top", "score", "why")
        with open(args.tsv, "w", encoding="utf-8") as out:
            out.write("file\t" + "\t".join(columns) + "\n")
            for name, row in rows:
                out.write(name + "\t" + "\t".join(str(row[c]) for c in columns) + "\n")
        print(f"rows: {args.tsv}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
