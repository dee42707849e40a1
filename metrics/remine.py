"""Re-mine a writer's source tree against its metric catalogue: a new release is a diff, not a hunt.

    python metrics/remine.py ~/src/vllm --writer vllm        # the metrics vLLM's tree defines and the
                                                             # catalogue lacks, and the reverse
    python metrics/remine.py ~/src/ray/python --writer ray-serve

Walks the tree's source files (.py, .rs, .cc/.cpp/.c/.h/.cu, .go, .csv) and takes each string
literal that names a metric of the writer: one that starts with the writer's prefix (``vllm:``,
``tgi_``, ``DCGM_FI_``; Ray's source names lack the ``ray_`` its exporter adds), or, for a writer
with no prefix, the name given to a ``Gauge``, ``Counter``, ``Histogram``, ``Summary`` or ``Info``.
It prints:

- ``lacks``: names the tree defines that the catalogue (metrics/WRITER.yaml) does not list. Read
  each where it is defined: its type, unit, labels and help go into the catalogue with the file
  and releases.
- ``gone``: catalogue names the tree no longer holds (renamed or removed in this release): keep
  them (older releases still define them) and say the last release in ``releases``.

It reads text only; nothing in the tree is run.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from diagnose.engines.catalogue import EngineMetrics, load_metrics_file  # noqa: E402

SOURCE_SUFFIXES = (".py", ".rs", ".cc", ".cpp", ".c", ".h", ".hpp", ".cu", ".go", ".csv")
_LITERAL = re.compile(r"""["']([A-Za-z_:][A-Za-z0-9_:]*)["']""")
# dcgm-exporter's counters files: a field a line, commented out where it is off by default
_CSV_FIELD = re.compile(r"^\s*(?:#\s*)?([A-Z][A-Z0-9_]+)\s*,")
# A registration whose first argument (or name=) is the metric's name, in prometheus_client's API
_REGISTERED = re.compile(
    r"\b(?:Gauge|Counter|Histogram|Summary|Info)\s*\(\s*(?:name\s*=\s*)?[\"']([A-Za-z_:][A-Za-z0-9_:]*)[\"']"
)
# What exporters add to a name: Ray's prefix, and the suffixes of a counter and a histogram's series
_EXPORTED = ("ray_",)
_SUFFIXES = ("_total", "_bucket", "_sum", "_count", "_created")


def _plain(name: str) -> str:
    """A name as the writer's source and its scrape both say it: no exporter's prefix or suffix."""
    for prefix in _EXPORTED:
        name = name.removeprefix(prefix)
    for suffix in _SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def defined(tree: Path, writer: EngineMetrics) -> Iterator[tuple[str, int, str]]:
    """(file, line, name) for each metric name the tree's sources give."""
    prefix = _plain(writer.prefix) if writer.prefix else ""
    for path in sorted(tree.rglob("*")):
        if path.suffix not in SOURCE_SUFFIXES or not path.is_file() or "test" in path.name.lower():
            continue
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            if path.suffix == ".csv":
                names = [match.group(1) for match in [_CSV_FIELD.match(line)] if match]
            elif prefix:
                names = [
                    name for name in _LITERAL.findall(line) if name.startswith(prefix) and name != prefix
                ]
            else:
                names = _REGISTERED.findall(line)
            for name in names:
                if not prefix or name.startswith(prefix):
                    yield str(path.relative_to(tree)), number, name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("tree", type=Path, help="a checkout of the writer's source")
    parser.add_argument("--writer", required=True, help="the catalogue file's name: metrics/WRITER.yaml")
    args = parser.parse_args(argv)
    folder = Path(__file__).resolve().parent
    catalogue = folder / f"{args.writer}.yaml"
    if not catalogue.is_file():
        known = ", ".join(sorted(p.stem for p in folder.glob("*.yaml")))
        parser.error(f"no metrics/{args.writer}.yaml; the writers are: {known}")
    if not args.tree.is_dir():
        parser.error(f"{args.tree}: not a folder")
    writer = load_metrics_file(catalogue)
    listed = {_plain(metric.name) for metric in writer.metrics}
    seen: set[str] = set()
    lacks: dict[str, str] = {}
    for file, number, name in defined(args.tree, writer):
        plain = _plain(name)
        if plain in listed:
            seen.add(plain)
        elif plain not in lacks:
            lacks[plain] = f"{file}:{number}"
    for name, where in lacks.items():
        print(f"lacks\t{name}\t{where}")
    gone = sorted(listed - seen)
    for name in gone:
        print(f"gone\t{name}")
    print(
        f"{len(lacks)} {'name' if len(lacks) == 1 else 'names'} the catalogue lacks; "
        f"{len(gone)} of {len(listed)} listed not in this tree"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
