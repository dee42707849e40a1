"""Pack recorded runs as regression fixtures: the dump's tables gzipped, its manifest, and truth.yaml.

    python -m testbed pack testbed-runs/cpu-bound-stage-20261202-004232 --into fixtures/recorded

A packed run is ``INTO/SCENARIO/`` holding ``truth.yaml`` and ``dump/`` (every
table as ``.csv.gz`` or ``.jsonl.gz``, which the dump reader reads as they are;
a profile beside them, ``.json``, gzipped too: importers read gzip by its bytes).
"""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import yaml

_TEXT_TABLES = (".csv", ".jsonl", ".json")


def pack(run: Path, into: Path) -> Path:
    """Copy one run into ``into/<scenario>/``, replacing an earlier pack of the same scenario."""
    truth = yaml.safe_load((run / "truth.yaml").read_text(encoding="utf-8"))
    target = into / str(truth["scenario"])
    if target.exists():
        shutil.rmtree(target)
    (target / "dump").mkdir(parents=True)
    shutil.copyfile(run / "truth.yaml", target / "truth.yaml")
    for source in sorted((run / "dump").iterdir()):
        if source.suffix in _TEXT_TABLES:
            packed = target / "dump" / f"{source.name}.gz"
            with source.open("rb") as raw, gzip.GzipFile(packed, "wb", compresslevel=9, mtime=0) as sink:
                shutil.copyfileobj(raw, sink)
        elif source.is_file():
            shutil.copyfile(source, target / "dump" / source.name)
    return target
