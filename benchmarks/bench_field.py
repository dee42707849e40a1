"""How much of a batch of real pastes is read, and what the diagnosis names on each file alone.

    python benchmarks/bench_field.py                          # every batch under ../shared/data/real-samples
    python benchmarks/bench_field.py --batch field-2026-12-b  # one batch
    python benchmarks/bench_field.py --tsv out.tsv            # one row per file, for a before/after diff
    python benchmarks/bench_field.py --quick                  # the first 12 files of each batch (CI)
    python benchmarks/bench_field.py --root DIR               # the batches under DIR (a held-out set)

Each file is analysed alone, as a user drops one paste into a folder: which importer read it (or
none), how many rows, which events came of it (from its importer and from the statements found on
its lines, statements/), and the first hypothesis with its score. A file is *read* when rows came of
it. Where ``tests/helpers/field_causes.py`` states the cause a file shows plainly (or, for a batch
under ``--root``, its ``SOURCES.tsv`` does, in a ``cause`` column), the file counts as *named* when
that cause is first and likely (>= 0.5); a file labelled ``none`` shows no fault, and a likely finding
on it is a false alarm. The batches are a check, not a specification:
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
    return sorted(
        p
        for p in batch.rglob("*")
        if p.is_file() and p.name not in _SKIP and not (p.name.startswith("SOURCES") and p.suffix == ".tsv")
    )


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


def _labelled_causes(root: Path) -> tuple[dict[str, str], set[str]]:
    """The causes a held-out batch's own ``SOURCES.tsv`` states (file, kind, source, cause, note), and
    the files it labels ``none``: the labels travel with the batch, not with the project."""
    causes: dict[str, str] = {}
    healthy: set[str] = set()
    for sources in sorted(root.glob("*/SOURCES*.tsv")):
        lines = sources.read_text(encoding="utf-8").splitlines()
        header = lines[0].split("\t") if lines else []
        if "file" not in header or "cause" not in header:
            continue
        at_file, at_cause = header.index("file"), header.index("cause")
        for line in lines[1:]:
            cells = line.split("\t")
            if len(cells) <= max(at_file, at_cause):
                continue
            name, cause = f"{sources.parent.name}/{cells[at_file]}", cells[at_cause].strip()
            if cause == "none":
                healthy.add(name)
            elif cause:
                causes[name] = cause
    return causes, healthy


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batch", action="append", help="a folder under real-samples (default: all)")
    parser.add_argument("--tsv", type=Path, help="write one row per file here")
    parser.add_argument(
        "--root",
        type=Path,
        default=REAL,
        help="the folder of batches (default: ../shared/data/real-samples); a batch elsewhere states its"
        " files' causes in its SOURCES.tsv",
    )
    add_quick(parser)
    args = parser.parse_args(argv)
    root: Path = args.root
    if not root.is_dir():
        print(f"no real samples at {root}: nothing to measure")
        return 0
    healthy: set[str] = set()
    if root.resolve() == REAL.resolve():
        sys.path.insert(0, str(_ROOT))
        from tests.helpers.field_causes import CAUSES
    else:
        CAUSES, healthy = _labelled_causes(root)

    batches = (
        [root / b for b in args.batch] if args.batch else sorted(p for p in root.iterdir() if p.is_dir())
    )
    rows: list[tuple[str, dict[str, object]]] = []
    for batch in batches:
        if batch.name == "profiler-traces":
            continue  # traces are measured by bench_trace and tests/test_profiler_traces.py
        files = _files(batch)[: 12 if args.quick else None]
        for path in files:
            rows.append((str(path.relative_to(root)), measure(path)))
    print(
        f"{'batch':<18} {'files':>6} {'read':>6} {'stated':>7} {'named':>6} {'likely, no cause':>17}"
        f" {'healthy':>8} {'false alarms':>13}"
    )
    for batch in batches:
        mine = [(name, row) for name, row in rows if name.startswith(batch.name + "/")]
        if not mine:
            continue
        stated = [(n, r) for n, r in mine if n in CAUSES]
        named = [n for n, r in stated if r["top"] == CAUSES[n] and float(r["score"]) >= 0.5]  # type: ignore[arg-type]
        alarms = [n for n, r in mine if n not in CAUSES and float(r["score"]) >= 0.5]  # type: ignore[arg-type]
        read = sum(1 for _, r in mine if r["read"])
        calm = [n for n, _ in mine if n in healthy]
        false_alarms = [n for n in alarms if n in healthy]
        print(
            f"{batch.name:<18} {len(mine):>6} {read:>6} {len(stated):>7} {len(named):>6} {len(alarms):>17}"
            f" {len(calm):>8} {len(false_alarms):>13}"
        )
        for name, row in stated:
            if name not in named:
                print(
                    f"  missed {name}: wanted {CAUSES[name]}, got {row['top'] or 'nothing'} {row['score']}"
                    f" ({row['importer'] or 'unread'}; {row['events'] or 'no events'})"
                )
        for name in alarms:
            row = dict(mine)[name]
            shows = " (labelled healthy)" if name in healthy else ""
            print(f"  likely with no stated cause{shows} {name}: {row['top']} {row['score']}")
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
